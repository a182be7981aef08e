"""The simulated worker's two-tier prefix cache, narrated with exact chunks and events.

Chunks are named by letters; a request's chain is stored tail first, so its head is the most recent.
"""

from __future__ import annotations

from kvgate.proto.events import EventKind, KVEvent
from kvgate.proto.ids import ChunkHash, Tier
from kvgate.sim.kvcache import TieredChunkCache

TTL = 60_000


def chain(names: str) -> list[ChunkHash]:
    return [ChunkHash(n.encode() * 16) for n in names]


def names(chunks: object) -> str:
    return "".join(c[:1].decode() for c in chunks)  # type: ignore[attr-defined]


def kinds(events: list[KVEvent]) -> list[tuple[str, str]]:
    return [(e.kind.value, names([e.chunk])) for e in events]


def test_lru_evicts_the_least_recent_chain_tail_first() -> None:
    cache = TieredChunkCache(gpu_chunks=4, cpu_chunks=0, ttl_ms=TTL, cpu_ttl_ms=TTL)
    cache.store(chain("abc"), now_ms=0)
    assert names(cache.gpu) == "cba"  # tail first: a (the head) is the most recent
    events = cache.store(chain("de"), now_ms=1)
    # Storing e (tail first) fills the 4th slot; storing d evicts the LRU: c, the old chain's tail.
    assert kinds(events) == [("stored", "e"), ("stored", "d"), ("evicted", "c")]
    assert cache.match(chain("abc"), now_ms=2) == "GG"
    assert cache.counters.evicted_pressure == 1


def test_a_hit_refreshes_recency_so_the_other_chain_goes_first() -> None:
    cache = TieredChunkCache(gpu_chunks=4, cpu_chunks=0, ttl_ms=TTL, cpu_ttl_ms=TTL)
    cache.store(chain("ab"), 0)
    cache.store(chain("cd"), 1)
    cache.store(chain("ab"), 2)  # reused: a and b become the most recent
    events = cache.store(chain("e"), 3)
    assert kinds(events) == [("stored", "e"), ("evicted", "d")]


def test_ttl_expiry_is_a_miss_at_once_and_swept_from_the_lru_end() -> None:
    cache = TieredChunkCache(gpu_chunks=8, cpu_chunks=0, ttl_ms=TTL, cpu_ttl_ms=TTL)
    cache.store(chain("ab"), 0)
    cache.store(chain("c"), 30_000)
    assert cache.match(chain("ab"), TTL - 1) == "GG"
    assert cache.match(chain("ab"), TTL) == ""
    assert kinds(cache.expire(TTL)) == [("evicted", "b"), ("evicted", "a")]
    assert cache.expire(TTL) == []  # idempotent
    assert cache.counters.evicted_ttl == 2
    assert cache.match(chain("c"), TTL) == "G"


def test_gpu_pressure_offloads_to_the_cpu_tier_and_a_hit_swaps_back() -> None:
    cache = TieredChunkCache(gpu_chunks=2, cpu_chunks=2, ttl_ms=TTL, cpu_ttl_ms=2 * TTL)
    cache.store(chain("ab"), 0)
    events = cache.store(chain("cd"), 10)
    assert kinds(events) == [("stored", "d"), ("offloaded", "b"), ("stored", "c"), ("offloaded", "a")]
    assert events[1].tier is Tier.CPU
    assert events[1].expires_at_ms == 10 + 2 * TTL  # at least cpu_ttl from the offload
    assert cache.match(chain("ab"), 20) == "CC"
    events = cache.store(chain("ab"), 20)  # swapped in: exclusive tiers, so c and d move down
    assert [e.kind for e in events].count(EventKind.STORED) == 2
    assert names(cache.gpu) == "ba"
    assert names(cache.cpu) == "dc"
    assert cache.counters.swapped_in == 2


def test_cpu_pressure_evicts_the_cpu_tiers_lru_and_expired_victims_are_not_offloaded() -> None:
    cache = TieredChunkCache(gpu_chunks=1, cpu_chunks=1, ttl_ms=TTL, cpu_ttl_ms=TTL)
    cache.store(chain("a"), 0)
    cache.store(chain("b"), 1)  # a -> CPU
    events = cache.store(chain("c"), 2)  # b -> CPU, a dropped
    assert kinds(events) == [("stored", "c"), ("evicted", "a"), ("offloaded", "b")]
    events = cache.store(chain("d"), 2 + TTL)  # c expired: dropped, not offloaded
    assert kinds(events) == [("stored", "d"), ("evicted", "c")]
