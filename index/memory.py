"""In-process prefix index: the embedded default for one machine, and each gateway's replica.

Lives in the gateway process, fed from each worker's gRPC event stream. Holdings are bitmaps over
worker slots (:mod:`.holders`), so a lookup costs O(chunks) mask operations plus O(workers matched),
however many workers share the prefix. All methods are coroutines only to share the
:class:`PrefixIndex` interface: none awaits, so each call is atomic with respect to the event loop.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from kvgate.common.clock import Clock
from kvgate.index.holders import HolderBitmaps
from kvgate.index.settings import MAX_PENDING_WAIT_S, IndexSettings
from kvgate.index.slots import SlotTable
from kvgate.index.types import (
    TAKEN,
    ApplyResult,
    ApplyStatus,
    DuplicateWorkerError,
    LookupResult,
    StaleEpochError,
    WorkerStatus,
)
from kvgate.proto.events import EventBatch, EventKind, KVEvent, Snapshot
from kvgate.proto.ids import ChunkHash, Epoch, SeqNo, WorkerId
from kvgate.proto.workers import WorkerInfo, WorkerLoad

_NEEDS_SNAPSHOT = -1


@dataclass(slots=True)
class _Worker:
    info: WorkerInfo
    load: WorkerLoad
    heartbeat_expires_ms: int
    slot: int
    last_seq: int = 0  # _NEEDS_SNAPSHOT after a purge
    live: bool = True


class MemoryPrefixIndex:
    """:class:`PrefixIndex` in process memory. Expiry is exact (a deadline heap drained before every
    read and write), so memory follows what is live."""

    def __init__(self, settings: IndexSettings, clock: Clock) -> None:
        self._settings = settings
        self._clock = clock
        self._workers: dict[WorkerId, _Worker] = {}
        self._epochs: dict[WorkerId, Epoch] = {}  # outlives deregistration, for fencing
        self._holders = HolderBitmaps()
        # a freed slot may still carry pending hints: reused only once they have expired
        self._slots = SlotTable(reuse_after_ms=settings.pending_ms(MAX_PENDING_WAIT_S) + 1)
        self._live_mask = 0
        self._recheck_ms = 0  # no live worker's heartbeat lapses before this

    # -- workers ---------------------------------------------------------------------------

    async def register(self, info: WorkerInfo, load: WorkerLoad) -> None:
        known = self._epochs.get(info.worker_id)
        if known is not None and info.epoch < known:
            raise StaleEpochError(f"{info.worker_id}: epoch {info.epoch} < registered {known}")
        old = self._workers.get(info.worker_id)
        if old is not None and known == info.epoch:
            if old.info != info:
                raise DuplicateWorkerError(TAKEN.format(info.worker_id, info.epoch))
            self._beat(old, load)
            return
        if old is not None:
            self._holders.clear(old.slot)
            old.info, old.last_seq = info, 0
            self._beat(old, load)
        else:
            slot = self._slots.take(info.worker_id, self._clock.now_ms())
            self._workers[info.worker_id] = worker = _Worker(info, load, 0, slot)
            self._beat(worker, load)
        self._epochs[info.worker_id] = info.epoch

    async def heartbeat(self, worker_id: WorkerId, epoch: Epoch, load: WorkerLoad) -> bool:
        worker = self._current(worker_id, epoch)
        if worker is None:
            return False
        self._beat(worker, load)
        return True

    async def deregister(self, worker_id: WorkerId, epoch: Epoch) -> None:
        worker = self._current(worker_id, epoch)
        if worker is not None:
            self._holders.clear(worker.slot)
            self._live_mask &= ~(1 << worker.slot)
            self._slots.free(worker.slot, self._clock.now_ms())
            del self._workers[worker_id]

    async def purge(self, worker_id: WorkerId) -> int:
        worker = self._workers.get(worker_id)
        if worker is None:
            return 0
        dropped = self._holders.clear(worker.slot)
        worker.last_seq, worker.live = _NEEDS_SNAPSHOT, False
        self._live_mask &= ~(1 << worker.slot)
        return dropped

    async def workers(self) -> list[WorkerStatus]:
        now = self._clock.now_ms()
        return [
            WorkerStatus(w.info, w.load, w.heartbeat_expires_ms, w.heartbeat_expires_ms - self._ttl_ms)
            for wid, w in sorted(self._workers.items())
            if w.live and w.heartbeat_expires_ms > now
        ]

    # -- events ----------------------------------------------------------------------------

    async def apply(self, batch: EventBatch) -> ApplyResult:
        worker, refusal = self._admit(batch.worker_id, batch.epoch)
        if worker is None:
            return refusal
        if worker.last_seq == _NEEDS_SNAPSHOT or batch.seq != worker.last_seq + 1:
            return ApplyResult(ApplyStatus.GAP, _expected(worker))
        self._holders.expire(self._clock.now_ms())
        for event in batch.events:
            self._apply_event(worker.slot, event)
        worker.last_seq = batch.seq
        return ApplyResult(ApplyStatus.APPLIED, SeqNo(batch.seq + 1))

    async def resync(self, snapshot: Snapshot) -> ApplyResult:
        worker, refusal = self._admit(snapshot.worker_id, snapshot.epoch)
        if worker is None:
            return refusal
        self._holders.expire(self._clock.now_ms())
        self._holders.clear(worker.slot)
        for holding in snapshot.holdings:
            self._holders.hold(worker.slot, holding.chunk, holding.tier, holding.expires_at_ms)
        worker.last_seq = snapshot.seq
        return ApplyResult(ApplyStatus.APPLIED, SeqNo(snapshot.seq + 1))

    # -- routing ---------------------------------------------------------------------------

    async def lookup(self, hashes: Sequence[ChunkHash]) -> LookupResult:
        if not hashes:
            return LookupResult(0, {})
        now = self._clock.now_ms()
        self._holders.expire(now)
        cohorts = self._holders.walk(hashes, self._live(now), self._slots.names)
        return LookupResult(len(hashes), cohorts=cohorts)

    async def add_pending(
        self, hashes: Sequence[ChunkHash], worker_id: WorkerId, wait_s: float = 0.0
    ) -> None:
        worker = self._workers.get(worker_id)
        if worker is None or not hashes:
            return  # a hint for a worker this index does not know could never match
        now = self._clock.now_ms()
        self._holders.expire(now)
        self._holders.add_pending(worker.slot, hashes, now + self._settings.pending_ms(wait_s))

    async def close(self) -> None:
        self._holders = HolderBitmaps()

    # -- internals -------------------------------------------------------------------------

    def _beat(self, worker: _Worker, load: WorkerLoad) -> None:
        worker.load, worker.live = load, True
        worker.heartbeat_expires_ms = self._clock.now_ms() + self._ttl_ms
        self._live_mask |= 1 << worker.slot
        if not self._recheck_ms or worker.heartbeat_expires_ms < self._recheck_ms:
            self._recheck_ms = worker.heartbeat_expires_ms

    def _live(self, now: int) -> int:
        """The mask of live workers' slots; rebuilt only when some heartbeat may have lapsed."""
        if self._recheck_ms and now >= self._recheck_ms:
            live = [w for w in self._workers.values() if w.live and w.heartbeat_expires_ms > now]
            self._live_mask = sum(1 << w.slot for w in live)
            self._recheck_ms = min((w.heartbeat_expires_ms for w in live), default=0)
        return self._live_mask

    def _admit(self, worker_id: WorkerId, epoch: Epoch) -> tuple[_Worker | None, ApplyResult]:
        known = self._epochs.get(worker_id)
        worker = self._workers.get(worker_id)
        if known is not None and epoch < known:
            return None, ApplyResult(ApplyStatus.STALE_EPOCH, SeqNo(0))
        if worker is None or epoch != known:
            return None, ApplyResult(ApplyStatus.UNKNOWN_WORKER, SeqNo(0))
        return worker, ApplyResult(ApplyStatus.APPLIED, _expected(worker))

    def _apply_event(self, slot: int, event: KVEvent) -> None:
        if event.kind is EventKind.CLEARED:
            self._holders.clear(slot)
        elif event.kind is EventKind.EVICTED:
            self._holders.drop(slot, event.chunk)  # type: ignore[arg-type]
        else:
            self._holders.hold(slot, event.chunk, event.tier, event.expires_at_ms)  # type: ignore[arg-type]

    def _current(self, worker_id: WorkerId, epoch: Epoch) -> _Worker | None:
        worker = self._workers.get(worker_id)
        return worker if worker is not None and worker.info.epoch == epoch else None

    @property
    def _ttl_ms(self) -> int:
        return round(self._settings.heartbeat_ttl_s * 1000)

    @property
    def size(self) -> int:
        """Chunks currently held by any worker (expired ones are dropped before every call)."""
        return self._holders.chunks


def _expected(worker: _Worker) -> SeqNo:
    return SeqNo(0 if worker.last_seq == _NEEDS_SNAPSHOT else worker.last_seq + 1)
