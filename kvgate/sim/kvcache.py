"""A simulated worker's prefix cache: exclusive GPU and CPU tiers of chunks, LRU + TTL.

The engine's policy (:mod:`kvgate.workers.kv.tiers`) at chunk granularity instead of 16-token blocks
(a chunk is the unit the index and the router see; the engine's blocks of one chunk live and die
together in the common case):

- A chunk is in at most one tier. Storing a chunk puts it in the GPU tier (new, recomputed, swapped
  in from the CPU tier, or refreshed) with expiry ``now + ttl``; every store is published as STORED.
- A request's chunks are stored tail first, so its first chunk is the most recently used: under
  pressure a chain loses its tail before its head (the engine frees a sequence's blocks tail first).
- GPU pressure takes the least recently used chunk: unexpired, it is OFFLOADED to the CPU tier (expiry
  at least ``now + cpu_ttl``) when there is one, else EVICTED; CPU pressure EVICTS the CPU tier's LRU.
- TTL: an expired chunk is a miss at once, and :meth:`expire` drops expired chunks from the LRU ends
  (EVICTED, never offloaded). With one TTL the LRU order is the expiry order, so the heads suffice;
  a CPU chunk that expires behind a younger head is a miss and is dropped when it reaches the head.

Not modelled: blocks pinned by running sequences (a request's chunks are the most recent when it runs,
and prompts are far smaller than a tier), pinned-prefix TTLs, and copy bandwidth limits beyond the
swap-in time the worker charges.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass

from kvgate.proto.events import KVEvent
from kvgate.proto.ids import ChunkHash, Tier
from kvgate.sim.settings import SimSettings


@dataclass(slots=True)
class CacheCounters:
    """Chunk counts since start (monotonic)."""

    stored: int = 0  # new or recomputed chunks written to the GPU tier
    swapped_in: int = 0  # CPU -> GPU
    offloaded: int = 0  # GPU -> CPU under pressure
    evicted_pressure: int = 0  # dropped unexpired to make room
    evicted_ttl: int = 0  # dropped because their TTL passed


class TieredChunkCache:
    """GPU and CPU tiers of ``gpu_chunks`` / ``cpu_chunks`` slots (0 CPU slots: no CPU tier).

    Each tier maps chunk -> expiry (ms), least recently used first. Mutating methods return the
    events the worker publishes, in order.
    """

    def __init__(self, gpu_chunks: int, cpu_chunks: int, ttl_ms: int, cpu_ttl_ms: int) -> None:
        if gpu_chunks < 1 or cpu_chunks < 0:
            raise ValueError("the GPU tier needs at least one chunk slot; the CPU tier >= 0")
        self.gpu_chunks = gpu_chunks
        self.cpu_chunks = cpu_chunks
        self._ttl_ms = ttl_ms
        self._cpu_ttl_ms = cpu_ttl_ms
        self.gpu: OrderedDict[ChunkHash, int] = OrderedDict()
        self.cpu: OrderedDict[ChunkHash, int] = OrderedDict()
        self.counters = CacheCounters()

    @staticmethod
    def for_workers(settings: SimSettings, workers: int = 1) -> TieredChunkCache:
        """The cache of one worker of ``settings``, or one pooling ``workers`` workers' capacity."""
        return TieredChunkCache(
            settings.gpu_chunks * workers,
            settings.cpu_chunks * workers,
            round(settings.ttl_s * 1000),
            round(settings.cpu_ttl_s * 1000),
        )

    def match(self, hashes: Sequence[ChunkHash], now_ms: int) -> str:
        """The tiers (``"G"``/``"C"``) of the leading unexpired chunks held, up to the first miss. Pure."""
        tiers: list[str] = []
        for chunk in hashes:
            expiry = self.gpu.get(chunk)
            if expiry is not None and expiry > now_ms:
                tiers.append(Tier.GPU.value)
                continue
            expiry = self.cpu.get(chunk)
            if expiry is None or expiry <= now_ms:
                break
            tiers.append(Tier.CPU.value)
        return "".join(tiers)

    def store(self, hashes: Sequence[ChunkHash], now_ms: int) -> list[KVEvent]:
        """Puts every chunk of a prefilled prompt in the GPU tier, tail first; evicts to make room."""
        events: list[KVEvent] = []
        expiry = now_ms + self._ttl_ms
        for chunk in reversed(hashes):
            if chunk in self.gpu:
                self.gpu.move_to_end(chunk)
            elif self.cpu.pop(chunk, None) is not None:
                self.counters.swapped_in += 1
            else:
                self.counters.stored += 1
            self.gpu[chunk] = expiry
            events.append(KVEvent.stored(chunk, Tier.GPU, expiry))
            if len(self.gpu) > self.gpu_chunks:
                self._evict_gpu(now_ms, events)
        return events

    def expire(self, now_ms: int) -> list[KVEvent]:
        """Drops expired chunks from the LRU end of both tiers (EVICTED). Idempotent."""
        events: list[KVEvent] = []
        for tier in (self.gpu, self.cpu):
            while tier and next(iter(tier.values())) <= now_ms:
                chunk, _ = tier.popitem(last=False)
                self.counters.evicted_ttl += 1
                events.append(KVEvent.evicted(chunk))
        return events

    def _evict_gpu(self, now_ms: int, events: list[KVEvent]) -> None:
        chunk, expiry = self.gpu.popitem(last=False)
        if expiry <= now_ms:
            self.counters.evicted_ttl += 1
            events.append(KVEvent.evicted(chunk))
        elif self.cpu_chunks == 0:
            self.counters.evicted_pressure += 1
            events.append(KVEvent.evicted(chunk))
        else:
            self._offload(chunk, max(expiry, now_ms + self._cpu_ttl_ms), now_ms, events)

    def _offload(self, chunk: ChunkHash, expiry: int, now_ms: int, events: list[KVEvent]) -> None:
        if len(self.cpu) >= self.cpu_chunks:
            victim, victim_expiry = self.cpu.popitem(last=False)
            if victim_expiry <= now_ms:
                self.counters.evicted_ttl += 1
            else:
                self.counters.evicted_pressure += 1
            events.append(KVEvent.evicted(victim))
        self.cpu[chunk] = expiry
        self.counters.offloaded += 1
        events.append(KVEvent.offloaded(chunk, expiry))

    @property
    def used_chunks(self) -> int:
        """Chunks held in the GPU tier (expired ones included until dropped)."""
        return len(self.gpu)
