"""Results and errors of the global prefix index."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from kvgate.proto.ids import SeqNo, Tier, WorkerId
from kvgate.proto.units import ChunkCount
from kvgate.proto.workers import WorkerInfo, WorkerLoad


class IndexUnavailableError(Exception):
    """The index backend did not answer within its timeout, or could not be reached.

    Callers fall back (the gateway to load-based routing); the index itself stays usable and
    recovers when the backend returns.
    """


class StaleEpochError(Exception):
    """A worker registered with an epoch lower than the one the index already knows."""


TAKEN = "{}: epoch {} is registered with another record (two processes claim this worker id)"


class DuplicateWorkerError(StaleEpochError):
    """A worker registered with the epoch of the registered incarnation but another record (another
    address, say): a second process claims the same worker id and epoch. The first one keeps it."""


_GPU, _CPU, _PENDING = Tier.GPU.value, Tier.CPU.value, Tier.PENDING.value  # plain str: enum access is slow


@dataclass(frozen=True, slots=True)
class PrefixMatch:
    """The leading chunks of one request that one worker holds.

    ``tiers[i]`` is the :class:`Tier` value (``"G"``, ``"C"`` or ``"P"``) of chunk ``i``;
    ``len(tiers)`` is the number of leading chunks held, counted up to the first miss.
    """

    worker_id: WorkerId
    tiers: str

    @property
    def chunks(self) -> ChunkCount:
        return ChunkCount(len(self.tiers))

    @property
    def gpu_chunks(self) -> ChunkCount:
        return ChunkCount(self.tiers.count(_GPU))

    @property
    def cpu_chunks(self) -> ChunkCount:
        return ChunkCount(self.tiers.count(_CPU))

    @property
    def pending_chunks(self) -> ChunkCount:
        return ChunkCount(self.tiers.count(_PENDING))


@dataclass(frozen=True, slots=True)
class Cohort:
    """Workers that hold the same leading chunks of a request in the same tiers."""

    tiers: str
    workers: tuple[WorkerId, ...]


class LookupResult:
    """Per live worker, how far it holds the request's chain; workers holding nothing are absent.

    Two views of one answer: ``matches`` (per worker) and ``cohorts`` (workers grouped by identical
    runs, what a decision at scale works on: a lookup over a thousand workers sharing a prefix is
    a handful of cohorts). Built from either; the other is derived on first use. Immutable.
    """

    __slots__ = ("_cohorts", "_matches", "num_chunks")

    def __init__(
        self,
        num_chunks: ChunkCount,
        matches: dict[WorkerId, PrefixMatch] | None = None,
        cohorts: tuple[Cohort, ...] | None = None,
    ) -> None:
        self.num_chunks = num_chunks
        self._matches = matches if matches is not None or cohorts is not None else {}
        self._cohorts = cohorts

    @property
    def matches(self) -> dict[WorkerId, PrefixMatch]:
        if self._matches is None:
            self._matches = {w: PrefixMatch(w, c.tiers) for c in self.cohorts for w in c.workers}
        return self._matches

    @property
    def cohorts(self) -> tuple[Cohort, ...]:
        if self._cohorts is None:
            grouped: dict[str, list[WorkerId]] = {}
            for w, m in (self._matches or {}).items():
                grouped.setdefault(m.tiers, []).append(w)
            self._cohorts = tuple(Cohort(t, tuple(ws)) for t, ws in grouped.items())
        return self._cohorts

    def match_for(self, worker_id: WorkerId) -> PrefixMatch | None:
        """``worker_id``'s match, or None when it holds none (no per-worker view is built)."""
        if self._matches is not None:
            return self._matches.get(worker_id)
        cohort = next((c for c in self.cohorts if worker_id in c.workers), None)
        return PrefixMatch(worker_id, cohort.tiers) if cohort is not None else None

    def chunks_for(self, worker_id: WorkerId) -> ChunkCount:
        """Leading chunks held by ``worker_id``; 0 when it holds none."""
        match = self.match_for(worker_id)
        return match.chunks if match else ChunkCount(0)

    @property
    def longest(self) -> ChunkCount:
        """The most leading chunks any worker holds (0 when none)."""
        return ChunkCount(max((len(c.tiers) for c in self.cohorts), default=0))

    def with_runs(self, runs: dict[WorkerId, str]) -> LookupResult:
        """This answer with each worker of ``runs`` holding exactly the given tiers instead."""
        if not runs:
            return self
        kept = [Cohort(c.tiers, tuple(w for w in c.workers if w not in runs)) for c in self.cohorts]
        added = [Cohort(tiers, (w,)) for w, tiers in runs.items()]
        return LookupResult(self.num_chunks, cohorts=tuple(c for c in kept + added if c.workers))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, LookupResult):
            return NotImplemented
        return (self.num_chunks, self.matches) == (other.num_chunks, other.matches)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"LookupResult(num_chunks={self.num_chunks}, matches={self.matches!r})"


class ApplyStatus(StrEnum):
    APPLIED = "applied"
    STALE_EPOCH = "stale_epoch"  # from an older incarnation: dropped
    UNKNOWN_WORKER = "unknown_worker"  # not registered (or a newer epoch than registered): dropped
    GAP = "gap"  # a batch is missing: dropped; the worker must re-publish a snapshot


@dataclass(frozen=True, slots=True)
class ApplyResult:
    """Outcome of applying a batch or snapshot. ``expected_seq`` is the seq the index wants next."""

    status: ApplyStatus
    expected_seq: SeqNo

    @property
    def ok(self) -> bool:
        return self.status is ApplyStatus.APPLIED


@dataclass(frozen=True, slots=True)
class WorkerStatus:
    """A live worker as the index sees it: registration, the load figures of its last heartbeat
    (sent at ``heartbeat_at_ms``), and when it drops out unless it heartbeats again. ``followed``:
    this index follows the worker's holdings (False: known from the shared membership only, so
    lookups cannot say what it holds)."""

    info: WorkerInfo
    load: WorkerLoad
    heartbeat_expires_ms: int
    heartbeat_at_ms: int
    followed: bool = True
