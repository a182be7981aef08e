"""Reference hit rates that bound what routing can achieve on a workload.

- **Unlimited**: one cache that never forgets -- the trace's ceiling (reuse that exists at all).
- **Pooled**: one cache with the whole cluster's capacity (every worker's GPU and CPU tiers added up)
  and the workers' eviction rules (:class:`TieredChunkCache`: LRU + TTL), which every request reaches
  -- what perfect routing with no load limits would get.

Both see requests at their arrival times, stored at once (no queueing), and count hits like the
workers do: leading chunks held, in tokens, capped at the prompt length.
"""

from __future__ import annotations

from kvgate.proto.ids import ChunkHash
from kvgate.sim.kvcache import TieredChunkCache
from kvgate.sim.settings import SimSettings
from kvgate.sim.workload import Workload


def unlimited_reuse(workload: Workload) -> list[int]:
    """Per request, in the workload's order: the prompt tokens one cache that keeps every chunk
    forever would reuse (its leading chunks seen before, capped at the prompt length)."""
    seen: set[ChunkHash] = set()
    reuse: list[int] = []
    for request, chain in zip(workload.requests, workload.hashes, strict=True):
        held = 0
        while held < len(chain) and chain[held] in seen:
            held += 1
        reuse.append(min(held * workload.chunk_size, request.input_length))
        seen.update(chain)
    return reuse


def unlimited_hit_rate(workload: Workload) -> float:
    """Token-weighted prefix hit rate of one cache that keeps every chunk forever."""
    return sum(unlimited_reuse(workload)) / workload.prompt_tokens


def pooled_hit_rate(workload: Workload, settings: SimSettings) -> float:
    """Token-weighted hit rate of one LRU + TTL cache with all ``settings.workers`` workers' capacity."""
    cache = TieredChunkCache.for_workers(settings, settings.workers)
    cached = 0
    for request, chain, arrival_s in zip(
        workload.requests, workload.hashes, workload.arrivals_s(settings.speed), strict=True
    ):
        now_ms = round(arrival_s * 1000)
        cached += min(len(cache.match(chain, now_ms)) * workload.chunk_size, request.input_length)
        cache.store(chain, now_ms)
    return cached / workload.prompt_tokens
