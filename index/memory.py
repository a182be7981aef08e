"""In-process prefix index: the embedded default for one machine, no server needed.

Lives in the gateway process; in embedded mode the gateway feeds it from each worker's gRPC event
stream. All methods are coroutines only to share the :class:`PrefixIndex` interface: none awaits,
so each call is atomic with respect to the event loop.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from kvgate.common.clock import Clock
from kvgate.index.settings import IndexSettings
from kvgate.index.types import (
    TAKEN,
    ApplyResult,
    ApplyStatus,
    DuplicateWorkerError,
    LookupResult,
    PrefixMatch,
    StaleEpochError,
    WorkerStatus,
)
from kvgate.proto.events import EventBatch, EventKind, Holding, KVEvent, Snapshot
from kvgate.proto.ids import ChunkHash, Epoch, SeqNo, Tier, WorkerId
from kvgate.proto.workers import WorkerInfo, WorkerLoad

_NEEDS_SNAPSHOT = -1

# chunk -> worker -> (tier char, expires_at_ms). No epoch: every write is fenced by epoch, and a
# new epoch clears the old incarnation's holdings.
_Entry = tuple[str, int]


@dataclass(slots=True)
class _Worker:
    info: WorkerInfo
    load: WorkerLoad
    heartbeat_expires_ms: int
    last_seq: int = 0  # _NEEDS_SNAPSHOT after a purge
    live: bool = True
    chunks: set[ChunkHash] = field(default_factory=set)


class MemoryPrefixIndex:
    """:class:`PrefixIndex` in a dict. Expired entries are dropped lazily and by an amortised sweep."""

    def __init__(self, settings: IndexSettings, clock: Clock) -> None:
        self._settings = settings
        self._clock = clock
        self._workers: dict[WorkerId, _Worker] = {}
        self._epochs: dict[WorkerId, Epoch] = {}  # outlives deregistration, for fencing
        self._chunks: dict[ChunkHash, dict[WorkerId, _Entry]] = {}
        self._pending: dict[ChunkHash, dict[WorkerId, int]] = {}
        self._writes_since_sweep = 0
        self._size_after_sweep = 0

    # -- workers ---------------------------------------------------------------------------

    async def register(self, info: WorkerInfo, load: WorkerLoad) -> None:
        known = self._epochs.get(info.worker_id)
        if known is not None and info.epoch < known:
            raise StaleEpochError(f"{info.worker_id}: epoch {info.epoch} < registered {known}")
        old = self._workers.get(info.worker_id)
        if old is not None and known == info.epoch:
            if old.info != info:
                raise DuplicateWorkerError(TAKEN.format(info.worker_id, info.epoch))
            old.load, old.live = load, True
            old.heartbeat_expires_ms = self._heartbeat_deadline()
            return
        self._clear(info.worker_id)
        self._epochs[info.worker_id] = info.epoch
        self._workers[info.worker_id] = _Worker(info, load, self._heartbeat_deadline())

    async def heartbeat(self, worker_id: WorkerId, epoch: Epoch, load: WorkerLoad) -> bool:
        worker = self._current(worker_id, epoch)
        if worker is None:
            return False
        worker.load, worker.live = load, True
        worker.heartbeat_expires_ms = self._heartbeat_deadline()
        return True

    async def deregister(self, worker_id: WorkerId, epoch: Epoch) -> None:
        if self._current(worker_id, epoch) is not None:
            self._clear(worker_id)
            del self._workers[worker_id]

    async def purge(self, worker_id: WorkerId) -> int:
        worker = self._workers.get(worker_id)
        if worker is None:
            return 0
        dropped = self._clear(worker_id)
        worker.last_seq, worker.live = _NEEDS_SNAPSHOT, False
        return dropped

    async def workers(self) -> list[WorkerStatus]:
        now = self._clock.now_ms()
        return [
            WorkerStatus(w.info, w.load, w.heartbeat_expires_ms, w.heartbeat_expires_ms - self._ttl_ms)
            for wid, w in sorted(self._workers.items())
            if self._is_live(w, now)
        ]

    # -- events ----------------------------------------------------------------------------

    async def apply(self, batch: EventBatch) -> ApplyResult:
        worker, refusal = self._admit(batch.worker_id, batch.epoch)
        if worker is None:
            return refusal
        if worker.last_seq == _NEEDS_SNAPSHOT or batch.seq != worker.last_seq + 1:
            return ApplyResult(ApplyStatus.GAP, _expected(worker))
        for event in batch.events:
            self._apply_event(batch.worker_id, event)
        worker.last_seq = batch.seq
        self._after_writes(len(batch.events))
        return ApplyResult(ApplyStatus.APPLIED, SeqNo(batch.seq + 1))

    async def resync(self, snapshot: Snapshot) -> ApplyResult:
        worker, refusal = self._admit(snapshot.worker_id, snapshot.epoch)
        if worker is None:
            return refusal
        self._clear(snapshot.worker_id)
        self._hold_all(snapshot.worker_id, snapshot.holdings)
        worker.last_seq = snapshot.seq
        self._after_writes(len(snapshot.holdings))
        return ApplyResult(ApplyStatus.APPLIED, SeqNo(snapshot.seq + 1))

    # -- routing ---------------------------------------------------------------------------

    async def lookup(self, hashes: Sequence[ChunkHash]) -> LookupResult:
        now = self._clock.now_ms()
        live = {wid for wid, w in self._workers.items() if self._is_live(w, now)}
        tiers: dict[WorkerId, list[str]] = {}
        active: list[WorkerId] | None = None
        for chunk in hashes:
            held = self._chunks.get(chunk, {})
            pending = self._pending.get(chunk, {})
            candidates = (held.keys() | pending.keys()) & live if active is None else active
            active = [w for w in candidates if self._extend_run(w, held, pending, now, tiers)]
            if not active:
                break
        return LookupResult(len(hashes), {wid: PrefixMatch(wid, "".join(ts)) for wid, ts in tiers.items()})

    @staticmethod
    def _extend_run(
        worker_id: WorkerId, held: dict, pending: dict, now: int, tiers: dict[WorkerId, list[str]]
    ) -> bool:
        """Appends the worker's tier for this chunk to its run; False if it does not hold it now."""
        entry = held.get(worker_id)
        if entry is not None and entry[1] > now:
            tier = entry[0]
        elif pending.get(worker_id, 0) > now:
            tier = Tier.PENDING.value
        else:
            return False
        tiers.setdefault(worker_id, []).append(tier)
        return True

    async def add_pending(self, hashes: Sequence[ChunkHash], worker_id: WorkerId) -> None:
        expires = self._clock.now_ms() + round(self._settings.pending_ttl_s * 1000)
        for chunk in hashes:
            self._pending.setdefault(chunk, {})[worker_id] = expires
        self._after_writes(len(hashes))

    async def close(self) -> None:
        self._chunks.clear()
        self._pending.clear()

    # -- internals -------------------------------------------------------------------------

    def _admit(self, worker_id: WorkerId, epoch: Epoch) -> tuple[_Worker | None, ApplyResult]:
        known = self._epochs.get(worker_id)
        worker = self._workers.get(worker_id)
        if known is not None and epoch < known:
            return None, ApplyResult(ApplyStatus.STALE_EPOCH, SeqNo(0))
        if worker is None or epoch != known:
            return None, ApplyResult(ApplyStatus.UNKNOWN_WORKER, SeqNo(0))
        return worker, ApplyResult(ApplyStatus.APPLIED, _expected(worker))

    def _apply_event(self, worker_id: WorkerId, event: KVEvent) -> None:
        if event.kind is EventKind.CLEARED:
            self._clear(worker_id)
        elif event.kind is EventKind.EVICTED:
            self._drop(worker_id, event.chunk)
        else:
            self._hold(worker_id, Holding(event.chunk, event.tier, event.expires_at_ms))

    def _hold_all(self, worker_id: WorkerId, holdings: Iterable[Holding]) -> None:
        for holding in holdings:
            self._hold(worker_id, holding)

    def _hold(self, worker_id: WorkerId, holding: Holding) -> None:
        entry = (holding.tier.value, holding.expires_at_ms)
        self._chunks.setdefault(holding.chunk, {})[worker_id] = entry
        self._workers[worker_id].chunks.add(holding.chunk)

    def _drop(self, worker_id: WorkerId, chunk: ChunkHash) -> None:
        holders = self._chunks.get(chunk)
        if holders is not None and holders.pop(worker_id, None) is not None and not holders:
            del self._chunks[chunk]
        worker = self._workers.get(worker_id)
        if worker is not None:
            worker.chunks.discard(chunk)

    def _clear(self, worker_id: WorkerId) -> int:
        """Drops every holding of ``worker_id`` (pending hints just expire); returns how many."""
        worker = self._workers.get(worker_id)
        owned = list(worker.chunks) if worker else []
        for chunk in owned:
            self._drop(worker_id, chunk)
        return len(owned)

    def _drop_pending(self, chunk: ChunkHash, worker_id: WorkerId) -> None:
        entries = self._pending[chunk]
        del entries[worker_id]
        if not entries:
            del self._pending[chunk]

    def _current(self, worker_id: WorkerId, epoch: Epoch) -> _Worker | None:
        worker = self._workers.get(worker_id)
        return worker if worker is not None and worker.info.epoch == epoch else None

    def _is_live(self, worker: _Worker, now: int) -> bool:
        return worker.live and worker.heartbeat_expires_ms > now

    def _heartbeat_deadline(self) -> int:
        return self._clock.now_ms() + self._ttl_ms

    @property
    def _ttl_ms(self) -> int:
        return round(self._settings.heartbeat_ttl_s * 1000)

    def _after_writes(self, count: int) -> None:
        """Sweeps expired entries once the writes since the last sweep exceed what that sweep left
        (at least 1024): O(1) amortised per write, and memory stays within about twice what is live."""
        self._writes_since_sweep += count
        if self._writes_since_sweep > max(1024, self._size_after_sweep):
            self._sweep(self._clock.now_ms())
            self._writes_since_sweep = 0
            self._size_after_sweep = len(self._chunks) + len(self._pending)

    def _sweep(self, now: int) -> None:
        for chunk, holders in list(self._chunks.items()):
            for wid in [w for w, (_, expires) in holders.items() if expires <= now]:
                self._drop(wid, chunk)
        for chunk, entries in list(self._pending.items()):
            for wid in [w for w, expires in entries.items() if expires <= now]:
                self._drop_pending(chunk, wid)

    @property
    def size(self) -> int:
        """Chunk keys currently stored (expired ones included until swept)."""
        return len(self._chunks)


def _expected(worker: _Worker) -> SeqNo:
    return SeqNo(0 if worker.last_seq == _NEEDS_SNAPSHOT else worker.last_seq + 1)
