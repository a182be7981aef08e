"""Allocation, sharing, freeing, LRU order and preemption, narrated with exact block ids.

Blocks hold 4 tokens (``BS``); token ids ``ids(start, n)`` from distinct ranges never share a block.
"""

from __future__ import annotations

import pytest

from kvgate.proto.hashing import chunk_hashes
from kvgate.proto.ids import Tier
from kvgate.workers.kv import Admission, CachedTokens, Prompt
from tests.workers.kv.helpers import BS, ROOT, S, check_integrity, ids, prompt, rig


def test_admit_allocates_in_order_and_caches_only_full_blocks() -> None:
    r = rig(gpu=10)
    p = prompt(ids(0, 10))
    # 10 tokens take 3 blocks: 0 and 1 are full and cached under their hashes, 2 holds 2 tokens.
    assert r.kv.admit(S("a"), p, token_budget=100) == Admission((0, 1, 2), CachedTokens(), 10, ())
    assert r.gpu() == (ids(3, 7), [])
    assert [b.hash for b in r.kv.gpu_pool.blocks[:3]] == [*p.block_hashes, None]
    check_integrity(r.kv)


def test_chunked_prefill_caches_each_block_once_it_is_filled() -> None:
    r = rig(gpu=10)
    p = prompt(ids(0, 10))
    # A budget of 6 tokens: blocks 0 (full) and 1 (2 of 4 tokens) this step.
    assert r.kv.admit(S("a"), p, token_budget=6) == Admission((0, 1), CachedTokens(), 6, ())
    assert r.kv.gpu_pool.num_cached == 1
    r.kv.end_step()
    # The other 4 tokens fill block 1 (now cached) and start block 2.
    assert r.kv.allocate_slots(S("a"), 4) == (2,)
    assert r.kv.gpu_pool.blocks[1].hash == p.block_hashes[1]
    assert r.kv.num_computed_tokens(S("a")) == 10


def test_a_second_sequence_shares_the_cached_prefix() -> None:
    r = rig(gpu=10)
    r.kv.admit(S("a"), prompt(ids(0, 10)), 100)
    r.kv.end_step()
    # b starts with a's first 8 tokens: blocks 0 and 1 are a GPU hit, its 3 own tokens go to block 3.
    b = r.kv.admit(S("b"), prompt([*ids(0, 8), 50, 51, 52]), 100)
    assert b == Admission((0, 1, 3), CachedTokens(gpu=8), 3, ())
    assert r.refs(0, 1, 2, 3) == [2, 2, 1, 1]
    assert r.kv.cached_tokens(S("b")) == CachedTokens(gpu=8)
    check_integrity(r.kv)


def test_blocks_computed_in_this_step_are_no_hit_yet() -> None:
    r = rig(gpu=10)
    r.kv.admit(S("a"), prompt(ids(0, 10)), 100)
    # Same step: a's KV is not written yet, so b computes its own copies 3, 4, 5.
    assert r.kv.admit(S("b"), prompt(ids(0, 10)), 100) == Admission((3, 4, 5), CachedTokens(), 10, ())
    # b's full blocks duplicate a's hashes: they stay uncached and become empty when b is freed.
    assert r.kv.gpu_pool.num_cached == 2
    r.kv.end_step()
    r.kv.free(S("a"))
    r.kv.free(S("b"))
    assert r.gpu() == ([6, 7, 8, 9, 2, 5, 4, 3], [1, 0])
    check_integrity(r.kv)


def test_a_fully_cached_prompt_still_computes_its_last_block() -> None:
    r = rig(gpu=10)
    r.kv.admit(S("a"), prompt(ids(0, 8)), 100)
    r.kv.end_step()
    r.kv.free(S("a"))
    # Both blocks are cached, but the engine needs the last token's logits: like vLLM, the hit stops
    # before the block holding the last token, which is recomputed in a new block (2).
    assert r.kv.lookup(prompt(ids(0, 8))).blocks == ((Tier.GPU, 0),)
    assert r.kv.admit(S("b"), prompt(ids(0, 8)), 100) == Admission((0, 2), CachedTokens(gpu=4), 4, ())
    # Block 2 duplicates cached block 1, which stays cached and free.
    assert r.gpu() == (ids(3, 7), [1])
    check_integrity(r.kv)


def test_free_queues_cached_blocks_tail_first_and_empties_the_rest() -> None:
    r = rig(gpu=6)
    r.kv.admit(S("a"), prompt(ids(0, 13)), 100)  # blocks 0, 1, 2 full; 3 holds one token
    r.kv.end_step()
    assert r.kv.free(S("a"))
    # The partial block 3 is empty again; the full ones are queued tail first: 2 is evicted first.
    assert r.gpu() == ([4, 5, 3], [2, 1, 0])
    # A 16-token prompt takes the empty blocks, then evicts the LRU head: a's tail block 2.
    assert r.kv.admit(S("b"), prompt(ids(100, 16)), 100).block_table == (4, 5, 3, 2)
    assert r.gpu() == ([], [1, 0])
    # a's first two blocks survive and still hit.
    assert r.kv.lookup(prompt(ids(0, 13))).cached == CachedTokens(gpu=8)
    check_integrity(r.kv)


def test_preemption_frees_room_and_allocation_is_never_partial() -> None:
    r = rig(gpu=4)
    assert r.kv.admit(S("a"), prompt(ids(0, 8)), 100).block_table == (0, 1)
    assert r.kv.admit(S("b"), prompt(ids(100, 8)), 100).block_table == (2, 3)
    r.kv.end_step()
    # a's next token needs a fifth block: None, and nothing changed.
    r.kv.append_tokens(S("a"), [8])
    assert r.kv.allocate_slots(S("a"), 1) is None
    assert r.kv.block_table(S("a")) == (0, 1)
    assert r.kv.num_computed_tokens(S("a")) == 8
    # The scheduler preempts b (not scheduled in this step); its blocks stay cached, tail first.
    assert r.kv.free(S("b"))
    assert r.gpu() == ([], [3, 2])
    assert r.kv.allocate_slots(S("a"), 1) == (3,)
    assert r.kv.counters.evicted_pressure == 1  # no CPU tier: b's tail block is dropped
    r.kv.end_step()
    # b's recompute would hit block 2, but needs one more block than is free: None, nothing taken.
    assert r.kv.admit(S("b"), prompt(ids(100, 8)), 100) is None
    assert r.gpu() == ([], [2])
    check_integrity(r.kv)


def test_decode_caches_each_filled_block_under_the_chained_hash() -> None:
    r = rig(gpu=10)
    r.kv.admit(S("a"), prompt(ids(0, 6)), 100)  # block 0 full, block 1 holds 2 tokens
    r.kv.end_step()
    for token in (6, 7):
        r.kv.append_tokens(S("a"), [token])
        assert r.kv.allocate_slots(S("a"), 1) == ()
        r.kv.end_step()
    # Token 7 filled block 1: cached under the hash of all 8 tokens, as if hashed in one go.
    assert r.kv.gpu_pool.blocks[1].hash == chunk_hashes(ids(0, 8), ROOT.digest(), BS)[1]
    r.kv.append_tokens(S("a"), [8])
    assert r.kv.allocate_slots(S("a"), 1) == (2,)
    check_integrity(r.kv)


def test_free_is_idempotent_and_abort_is_free() -> None:
    r = rig(gpu=4)
    assert not r.kv.free(S("nobody"))
    r.kv.admit(S("a"), prompt(ids(0, 8)), 100)
    r.kv.end_step()
    assert r.kv.abort(S("a"))
    assert not r.kv.free(S("a"))
    assert r.gpu() == ([2, 3], [1, 0])


def test_contract_violations_raise() -> None:
    r = rig(gpu=4)
    r.kv.admit(S("a"), prompt(ids(0, 8)), 100)
    with pytest.raises(RuntimeError, match="end_step"):
        r.kv.free(S("a"))  # its KV is computed in this step
    with pytest.raises(ValueError, match="already admitted"):
        r.kv.admit(S("a"), prompt(ids(0, 8)), 100)
    with pytest.raises(ValueError, match="token_budget"):
        r.kv.admit(S("b"), prompt(ids(0, 8)), 0)
    r.kv.end_step()
    with pytest.raises(ValueError, match="known"):
        r.kv.allocate_slots(S("a"), 1)  # token 8 is not appended yet
    p = prompt(ids(0, 8))
    with pytest.raises(ValueError, match="hashes"):
        r.kv.admit(S("c"), Prompt(p.token_ids, p.root, p.block_hashes[:1], p.chunk_hashes), 10)
    check_integrity(r.kv)
