"""One simulated worker: a prefill queue, a prefix cache, and what it tells the index.

Life of a request on a worker (the event loop in :mod:`kvgate.sim.engine` calls these in order):
``enqueue`` -> ``start_next`` (when the worker is free: the cache is matched now, which fixes the
cached tokens and the prefill time) -> ``finish_prefill`` (first token: every chunk of the prompt is
stored, and the changes go out as one :class:`EventBatch`) -> ``finish_decode``.

A warm-up (a background prefill of a shared opening) arrives as pieces of at most a step's tokens,
each a prefix of the next: they wait in a queue of their own and start only when no other job waits,
so a request that arrives meanwhile waits for one piece at most, as the engine's background
sequences yield at its next step; a request that starts with a piece's chunks promotes the pieces
it needs (they go before it, and it reuses them), as the engine promotes a background sequence it
shares. The load figures leave queued pieces out, as the engine's do.
"""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Sequence
from dataclasses import dataclass

from kvgate.gateway.routing.types import RouteDecision
from kvgate.proto.events import EventBatch, KVEvent
from kvgate.proto.ids import ChunkHash, Epoch, SeqNo, Tier, WorkerId
from kvgate.proto.workers import WorkerInfo, WorkerLoad
from kvgate.sim.kvcache import TieredChunkCache
from kvgate.sim.settings import KV_BLOCK_TOKENS, SimSettings
from kvgate.sim.timing import TimeModel

SIM_FINGERPRINT = "kvgate-sim"


@dataclass(slots=True)
class SimJob:
    """A request routed to a worker. ``expected_computed`` is the worker's own estimate at enqueue
    time (for its load figures), ``held_chunks`` the run of its chunks held then; ``cached_tokens`` /
    ``swapped_tokens`` are fixed when prefill starts."""

    index: int
    arrival_s: float
    prompt_tokens: int
    output_tokens: int
    hashes: Sequence[ChunkHash]
    decision: RouteDecision
    expected_computed: int = 0
    held_chunks: int = 0
    start_s: float = 0.0
    cached_tokens: int = 0
    swapped_tokens: int = 0
    background: bool = False  # runs only when no other job waits (a warm-up's piece, until promoted)
    warm_up: bool = False  # a warm-up's piece: no request to answer when it ends
    fetch_chunks: int = 0  # leading chunks the worker is fetching from a KV source for this request
    ready_s: float = 0.0  # when that fetch ends: the request starts no sooner
    fetched_tokens: int = 0  # prompt tokens the fetch brought (once it ended)

    @property
    def computed_tokens(self) -> int:
        return self.prompt_tokens - self.cached_tokens


class SimWorker:
    """Mutable state of one worker; one incarnation (epoch 1) for the whole run."""

    def __init__(self, worker_id: WorkerId, settings: SimSettings, timing: TimeModel) -> None:
        self.info = WorkerInfo(worker_id, Epoch(1), f"sim:{worker_id}", SIM_FINGERPRINT, "kvgate-sim")
        self.cache = TieredChunkCache.for_workers(settings)
        self._chunk_size = settings.chunk_size
        self._timing = timing
        self._queue: deque[SimJob] = deque()
        self._background: deque[SimJob] = deque()  # warm-up pieces, run when no other job waits
        self._pending: Counter[ChunkHash] = Counter()  # chunks of the jobs queued or in prefill
        self.current: SimJob | None = None
        self._prefill_end_s = 0.0
        self._decoding = 0
        self._active_tokens = 0  # KV of sequences in prefill or decode
        self._seq = 0
        self.computed_tokens = 0  # tokens prefilled here so far (the imbalance measure)

    @property
    def worker_id(self) -> WorkerId:
        return self.info.worker_id

    def enqueue(self, job: SimJob, now_ms: int) -> None:
        """Queues ``job`` behind the others (FIFO). Its expected work leaves out the chunks held and
        those an earlier queued job computes first (a prefix shared within the queue is computed once)."""
        tiers = self.cache.match(job.hashes, now_ms)
        job.held_chunks = run = max(len(tiers), job.fetch_chunks)
        while run < len(job.hashes) and self._pending[job.hashes[run]] > 0:
            run += 1
        computed = job.prompt_tokens - min(run * self._chunk_size, job.prompt_tokens)
        job.expected_computed = 0 if job.background else computed  # the engine reports no warm-up
        self._pending.update(job.hashes)
        if not job.background:
            self._promote(job)
        (self._background if job.background else self._queue).append(job)

    def _promote(self, job: SimJob) -> None:
        """The queued warm-up pieces whose chunks ``job``'s prompt starts with become ordinary jobs,
        ahead of it (the engine promotes a background sequence a new request shares): the request
        waits for them and reuses what they compute instead of computing it beside them."""
        current = self.current
        shared = current is not None and current.warm_up and _starts_with(job.hashes, current.hashes)
        if current is not None and shared:
            current.background = False
        done = self._chunk_size * len(current.hashes) if current is not None and shared else 0
        for piece in [p for p in self._background if _starts_with(job.hashes, p.hashes)]:
            self._background.remove(piece)
            piece.background = False
            piece.expected_computed = max(piece.prompt_tokens - done, 0)
            done = piece.prompt_tokens
            self._queue.append(piece)

    def start_next(self, now_s: float, now_ms: int) -> float | None:
        """Starts the next queued prefill if the worker is free; returns when it ends (None: nothing
        started; also while the next job's KV fetch runs). The cache is matched now: what the worker holds
        at prefill time is what it reuses."""
        if self.current is not None or not (self._queue or self._background):
            return None
        if (self._queue or self._background)[0].ready_s > now_s:
            return None  # its KV fetch is running: the queue waits, in order (the fetch's end restarts it)
        job = (self._queue or self._background).popleft()
        tiers = self.cache.match(job.hashes, now_ms)
        job.cached_tokens = self._cached_tokens(tiers, job.prompt_tokens)
        cpu_tokens = tiers.count(Tier.CPU.value) * self._chunk_size
        job.swapped_tokens = min(cpu_tokens, job.cached_tokens)
        job.start_s = now_s
        self.current = job
        self._active_tokens += job.prompt_tokens
        self._prefill_end_s = now_s + self._timing.prefill_s(job.computed_tokens, job.swapped_tokens)
        return self._prefill_end_s

    def finish_prefill(self, now_ms: int) -> tuple[SimJob, EventBatch]:
        """Ends the current prefill: its chunks are stored (events in the returned batch) and the
        request starts decoding."""
        job = self.current
        if job is None:
            raise RuntimeError(f"{self.worker_id}: no prefill is running")
        self.current = None
        for h in job.hashes:  # a chunk no other queued job computes leaves the record
            if (left := self._pending[h] - 1) > 0:
                self._pending[h] = left
            else:
                del self._pending[h]
        self.computed_tokens += job.computed_tokens
        self._decoding += 1
        self._active_tokens += job.output_tokens
        return job, self.batch(self.cache.store(job.hashes, now_ms))

    def finish_decode(self, job: SimJob) -> None:
        """The request generated its last token: its KV stops being in use."""
        self._decoding -= 1
        self._active_tokens -= job.prompt_tokens + job.output_tokens

    def expire(self, now_ms: int) -> EventBatch | None:
        """The engine's periodic TTL sweep; the batch of evictions, None when nothing expired."""
        events = self.cache.expire(now_ms)
        return self.batch(events) if events else None

    def batch(self, events: list[KVEvent]) -> EventBatch:
        """``events`` as the next numbered batch of this incarnation."""
        self._seq += 1
        return EventBatch(self.worker_id, self.info.epoch, SeqNo(self._seq), tuple(events))

    def load(self, now_s: float) -> WorkerLoad:
        """The heartbeat's load figures. KV in use is the active sequences' (cached chunks not in use
        count as free, as the engine reports them: they are evictable, and ``gpu_blocks_cached``
        counts them); the eviction counters are the cache's."""
        waiting = sum(job.expected_computed for job in self._queue)
        if self.current is not None and not self.current.background:
            remaining = round(max(self._prefill_end_s - now_s, 0.0) * self._timing.prefill_tokens_per_s)
            waiting += min(remaining, self.current.computed_tokens)
        blocks = self._blocks
        total = blocks(self.cache.gpu_chunks)
        used = min(-(-self._active_tokens // KV_BLOCK_TOKENS), total)
        held = blocks(len(self.cache.gpu))
        cpu_total = blocks(self.cache.cpu_chunks)
        counters = self.cache.counters
        return WorkerLoad(
            waiting_prefill_tokens=waiting,
            running_seqs=self._decoding + (self.current is not None),
            waiting_seqs=len(self._queue),
            gpu_blocks_total=total,
            gpu_blocks_free=total - used,
            cpu_blocks_total=cpu_total,
            cpu_blocks_free=cpu_total,
            gpu_blocks_cached=min(total - used, max(held - used, 0)),
            evicted_ttl_blocks=blocks(counters.evicted_ttl),
            evicted_pressure_blocks=blocks(counters.evicted_pressure),
            offloaded_blocks=blocks(counters.offloaded),
        )

    def _blocks(self, chunks: int) -> int:
        """``chunks`` cache chunks as KV blocks (what a heartbeat counts)."""
        return chunks * self._chunk_size // KV_BLOCK_TOKENS

    def _cached_tokens(self, tiers: str, prompt_tokens: int) -> int:
        return min(len(tiers) * self._chunk_size, prompt_tokens)


def _starts_with(hashes: Sequence[ChunkHash], prefix: Sequence[ChunkHash]) -> bool:
    return len(hashes) >= len(prefix) > 0 and hashes[len(prefix) - 1] == prefix[-1] and hashes[0] == prefix[0]
