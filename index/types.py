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
class LookupResult:
    """Per live worker, how far it holds the request's chain; workers holding nothing are absent."""

    num_chunks: ChunkCount
    matches: dict[WorkerId, PrefixMatch]

    def chunks_for(self, worker_id: WorkerId) -> ChunkCount:
        """Leading chunks held by ``worker_id``; 0 when it holds none."""
        match = self.matches.get(worker_id)
        return match.chunks if match else ChunkCount(0)

    @property
    def longest(self) -> ChunkCount:
        """The most leading chunks any worker holds (0 when none)."""
        return max((m.chunks for m in self.matches.values()), default=ChunkCount(0))


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
    (sent at ``heartbeat_at_ms``), and when it drops out unless it heartbeats again."""

    info: WorkerInfo
    load: WorkerLoad
    heartbeat_expires_ms: int
    heartbeat_at_ms: int
