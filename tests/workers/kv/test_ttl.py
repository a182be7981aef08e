"""TTL eviction: expiry counted from the last use, refreshed by hits, longer for pinned prefixes,
never for blocks in use; under pressure an expired block goes before the LRU one."""

from __future__ import annotations

from kvgate.common.clock import ManualClock
from kvgate.workers.kv import CachedTokens, Pin
from tests.workers.kv.helpers import S, check_integrity, ids, prompt, rig

T0 = ManualClock().now_ms()


def test_expire_drops_unreferenced_blocks_whose_ttl_passed() -> None:
    r = rig(gpu=10, ttl_s=300)
    r.kv.admit(S("a"), prompt(ids(0, 9)), 100)  # blocks 0, 1 full; 2 partial
    r.kv.end_step()
    r.kv.free(S("a"))
    assert r.gpu() == ([*ids(3, 7), 2], [1, 0])
    r.clock.advance(299)
    assert r.kv.expire() == 0
    r.clock.advance(1)  # now == expiry: expired
    assert r.kv.expire() == 2
    assert r.gpu() == ([*ids(3, 7), 2, 0, 1], [])
    assert r.kv.counters.evicted_ttl == 2
    assert r.kv.expire() == 0  # idempotent
    check_integrity(r.kv)


def test_a_hit_and_the_last_use_refresh_the_ttl() -> None:
    r = rig(gpu=10, ttl_s=300)
    r.kv.admit(S("a"), prompt(ids(0, 9)), 100)
    r.kv.end_step()
    r.kv.free(S("a"))
    r.clock.advance(200)
    # b hits blocks 0 and 1 at T0+200 s: they now expire at T0+500 s.
    assert r.kv.admit(S("b"), prompt(ids(0, 9)), 100).cached == CachedTokens(gpu=8)
    assert [b.expires_at_ms for b in r.kv.gpu_pool.blocks[:2]] == [T0 + 500_000] * 2
    r.kv.end_step()
    r.clock.advance(400)
    assert r.kv.expire() == 0  # past the expiry, but b still uses them
    r.kv.free(S("b"))  # last use at T0+600 s: expire at T0+900 s
    r.clock.advance(299)
    assert r.kv.expire() == 0
    r.clock.advance(1)
    assert r.kv.expire() == 2


def test_a_refreshed_block_outlives_its_old_deadline() -> None:
    r = rig(gpu=10, ttl_s=300)
    r.kv.admit(S("a"), prompt(ids(0, 9)), 100)
    r.kv.end_step()
    r.kv.free(S("a"))  # expires at T0+300 s
    r.clock.advance(200)
    r.kv.admit(S("b"), prompt(ids(0, 9)), 100)
    r.kv.end_step()
    r.clock.advance(50)
    r.kv.free(S("b"))  # used until T0+250 s: expires at T0+550 s
    r.clock.advance(50)
    assert r.kv.expire() == 0  # T0+300 s: the old deadline no longer counts
    r.clock.advance(250)
    assert r.kv.expire() == 2


def test_a_pinned_prefix_outlives_the_default_ttl() -> None:
    r = rig(gpu=10, ttl_s=300)
    # Pin the first 5 tokens for an hour: blocks 0 and 1 overlap them; block 2 keeps the default.
    r.kv.admit(S("a"), prompt(ids(0, 13)), 100, pin=Pin(tokens=5, ttl_s=3600))
    r.kv.end_step()
    r.kv.free(S("a"))
    expiries = [b.expires_at_ms for b in r.kv.gpu_pool.blocks[:3]]
    assert expiries == [T0 + 3_600_000, T0 + 3_600_000, T0 + 300_000]
    r.clock.advance(300)
    assert r.kv.expire() == 1
    assert r.kv.lookup(prompt(ids(0, 13))).cached == CachedTokens(gpu=8)
    # A later unpinned hit never shortens the pin (expiries only move later).
    r.kv.admit(S("b"), prompt(ids(0, 9)), 100)
    assert r.kv.gpu_pool.blocks[0].expires_at_ms == T0 + 3_600_000
    r.kv.end_step()
    r.kv.free(S("b"))
    r.clock.advance(3300)
    assert r.kv.expire() == 2
    check_integrity(r.kv)


def test_pressure_evicts_an_expired_block_before_the_lru_one_and_drops_it() -> None:
    r = rig(gpu=4, cpu=4, ttl_s=300)
    r.kv.admit(S("a"), prompt(ids(0, 8)), 100, pin=Pin(tokens=8, ttl_s=3600))  # blocks 0, 1
    r.kv.admit(S("b"), prompt(ids(100, 8)), 100)  # blocks 2, 3
    r.kv.end_step()
    r.kv.free(S("a"))
    r.kv.free(S("b"))
    assert r.gpu() == ([], [1, 0, 3, 2])
    r.clock.advance(301)  # b's blocks expired, a's pinned ones not
    # The LRU head is a's block 1, but an expired block goes first: b's block 2 (earliest expiry,
    # lowest id). Its TTL ended, so it is dropped, not offloaded.
    assert r.kv.admit(S("c"), prompt(ids(200, 4)), 100).block_table == (2,)
    assert r.gpu() == ([], [1, 0, 3])
    assert r.cpu() == ([0, 1, 2, 3], [])
    assert (r.kv.counters.evicted_ttl, r.kv.counters.offloaded) == (1, 0)
    check_integrity(r.kv)


def test_the_cpu_tier_keeps_an_offloaded_block_for_its_own_ttl() -> None:
    r = rig(gpu=2, cpu=2, ttl_s=300, cpu_ttl_s=600)
    r.kv.admit(S("a"), prompt(ids(0, 5)), 100)  # block 0 full, block 1 partial
    r.kv.end_step()
    r.kv.free(S("a"))
    r.clock.advance(100)
    # b needs both blocks: a's block 0 (unexpired) is offloaded, to stay until T0+100 s+600 s.
    r.kv.admit(S("b"), prompt(ids(100, 8)), 100)
    assert r.kv.end_step().offload == ((0, 0),)
    assert r.kv.cpu_pool.blocks[0].expires_at_ms == T0 + 700_000
    r.clock.advance(599)
    assert r.kv.expire() == 0
    r.clock.advance(1)
    assert r.kv.expire() == 1
    assert r.cpu() == ([1, 0], [])
    check_integrity(r.kv)
