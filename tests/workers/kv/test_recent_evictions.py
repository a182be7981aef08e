"""Recent evictions: which chunks stopped being held after a request arrived, and how much of a
router's prediction that cost. Blocks of 4 tokens, chunks of 2 blocks (see helpers)."""

from __future__ import annotations

import pytest

from kvgate.proto.ids import ChunkHash
from kvgate.workers.kv.evictions import RecentEvictions
from tests.workers.kv.helpers import S, ids, prompt, rig

A, B, C = ChunkHash(b"a" * 16), ChunkHash(b"b" * 16), ChunkHash(b"c" * 16)


def test_a_chunk_evicted_after_the_mark_counts_one_evicted_before_does_not() -> None:
    recent = RecentEvictions(capacity=4)
    recent.record(A)
    mark = recent.mark
    recent.record(B)
    assert (recent.evicted_since(A, mark), recent.evicted_since(B, mark)) == (False, True)
    assert not recent.evicted_since(C, 0)  # never evicted
    recent.record(A)  # evicted again (after being stored again): the latest eviction counts
    assert recent.evicted_since(A, mark)


def test_the_record_is_bounded_and_forgets_the_oldest() -> None:
    recent = RecentEvictions(capacity=2)
    for chunk in (A, B, C):
        recent.record(chunk)
    assert len(recent) == 2
    assert not recent.evicted_since(A, 0)  # forgotten: reads as "not evicted since"
    assert recent.evicted_since(B, 0)
    assert recent.evicted_since(C, 0)
    with pytest.raises(ValueError, match="capacity"):
        RecentEvictions(capacity=0)


def test_only_a_held_chunk_that_stops_being_held_is_recorded() -> None:
    r = rig(gpu=8, ttl_s=10)
    p = prompt(ids(0, 17))  # 4 full blocks = 2 chunks, and a last token
    r.kv.admit(S("a"), p, 100)
    r.kv.end_step()
    r.kv.free(S("a"))
    r.kv.flush_events()
    assert r.kv.eviction_mark == 0  # stored, nothing evicted
    r.clock.advance(11)
    r.kv.expire()
    r.kv.flush_events()
    assert r.kv.eviction_mark == 2  # both chunks, once each
    r.kv.flush_events()
    assert r.kv.eviction_mark == 2


def test_the_shortfall_is_blamed_on_an_eviction_only_after_the_mark() -> None:
    r = rig(gpu=8, ttl_s=10)
    p = prompt(ids(0, 17))
    r.kv.admit(S("a"), p, 100)
    r.kv.end_step()
    r.kv.free(S("a"))
    r.kv.flush_events()
    arrived = r.kv.eviction_mark  # a request for the same prefix arrives, predicted 16 cached tokens
    r.clock.advance(11)
    r.kv.expire()  # ...and the prefix expires before it is admitted
    r.kv.end_step()
    assert r.kv.lookup(p).cached.total == 0
    assert r.kv.lost_to_eviction(p, 0, 16, arrived) == 16
    assert r.kv.lost_to_eviction(p, 0, 16, r.kv.eviction_mark) == 0  # arrived after: the index was stale
    assert r.kv.lost_to_eviction(p, 8, 16, arrived) == 8  # the first chunk was reused, the second lost
    assert r.kv.lost_to_eviction(p, 16, 16, arrived) == 0  # nothing fell short


def test_a_prediction_past_the_reusable_blocks_is_no_shortfall() -> None:
    r = rig(gpu=8, ttl_s=10)
    p = prompt(ids(0, 16))  # 2 whole chunks, but the last block holds the last token: 12 reusable
    r.kv.admit(S("a"), p, 100)
    r.kv.end_step()
    r.kv.free(S("a"))
    r.kv.flush_events()
    arrived = r.kv.eviction_mark
    r.clock.advance(11)
    r.kv.expire()
    r.kv.end_step()
    assert r.kv.lost_to_eviction(p, 12, 16, arrived) == 0
    assert r.kv.lost_to_eviction(p, 8, 16, arrived) == 4
