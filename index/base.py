"""The global prefix index: which worker holds which chunk, in which tier, until when.

One interface, two backends (in-process memory, Redis), one shared test suite. The index is a
hint: a stale or wrong entry costs a cache miss, never wrong output (workers verify token ids).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from kvgate.index.types import ApplyResult, LookupResult, WorkerStatus
from kvgate.proto.events import EventBatch, Snapshot
from kvgate.proto.ids import ChunkHash, Epoch, WorkerId
from kvgate.proto.workers import WorkerInfo, WorkerLoad


class PrefixIndex(Protocol):
    """Every method may raise :class:`IndexUnavailableError` (backend down or slower than its timeout).

    Workers call register / heartbeat / apply / resync / deregister; gateways call lookup /
    add_pending / workers / purge. Times come from the index's clock (unix ms).
    """

    async def register(self, info: WorkerInfo, load: WorkerLoad) -> None:
        """Registers a worker incarnation; counts as a heartbeat.

        A higher epoch than known drops everything the old incarnation held and expects seq 1
        next; the same epoch with the same record only refreshes it (idempotent); the same epoch with
        another record raises :class:`DuplicateWorkerError` (two processes claim one id); a lower
        epoch raises :class:`StaleEpochError`.
        """
        ...

    async def heartbeat(self, worker_id: WorkerId, epoch: Epoch, load: WorkerLoad) -> bool:
        """Keeps the worker live for ``heartbeat_ttl_s`` more and records its load.

        Returns False (and changes nothing) unless ``epoch`` is the registered incarnation.
        """
        ...

    async def deregister(self, worker_id: WorkerId, epoch: Epoch) -> None:
        """Removes a worker and all it holds; a no-op for any epoch but the registered one.

        The epoch stays recorded, so the old incarnation's late events remain fenced.
        """
        ...

    async def apply(self, batch: EventBatch) -> ApplyResult:
        """Applies one batch atomically, if it is the next of the registered incarnation.

        Anything else is dropped whole: an older epoch (STALE_EPOCH), an unregistered worker or
        newer epoch (UNKNOWN_WORKER), or a seq other than the next one (GAP: the worker must
        :meth:`resync`). Applying STORED for a held chunk updates its tier and expiry.
        """
        ...

    async def resync(self, snapshot: Snapshot) -> ApplyResult:
        """Replaces everything the worker held with ``snapshot``; the next seq is snapshot.seq+1.

        Fenced by epoch like :meth:`apply`; any seq is accepted.
        """
        ...

    async def purge(self, worker_id: WorkerId) -> int:
        """Drops all the worker holds and takes it out of lookups until its next heartbeat.

        Its next batch is answered GAP, so a worker that is still alive re-publishes a snapshot.
        Returns the number of chunks dropped. Idempotent.
        """
        ...

    async def lookup(self, hashes: Sequence[ChunkHash]) -> LookupResult:
        """In one round trip: per live worker, the leading chunks of ``hashes`` it holds.

        A holding counts when it is unexpired and from the worker's registered epoch; a pending
        entry counts as tier PENDING. The walk stops at the first chunk no candidate holds.
        """
        ...

    async def add_pending(
        self, hashes: Sequence[ChunkHash], worker_id: WorkerId, wait_s: float = 0.0
    ) -> None:
        """Records that a request with these chunks was just routed to (or taken in by)
        ``worker_id``, expected to wait ``wait_s`` before the worker computes them.

        Each entry lives ``pending_ttl_s`` after that wait (:meth:`IndexSettings.pending_ms`), so a
        burst of requests sharing a new prefix follows the first one, on every gateway, until the
        worker has published what it stored. Idempotent.
        """
        ...

    async def workers(self) -> list[WorkerStatus]:
        """The live workers (heartbeat not lapsed, not purged since), sorted by worker id."""
        ...

    async def close(self) -> None:
        """Releases connections; the index must not be used afterwards."""
        ...


@runtime_checkable
class SharedMembership(Protocol):
    """An index whose membership comes from a shared store (Redis) that it may lose touch with
    while it keeps routing on what it follows itself."""

    @property
    def shared_reachable(self) -> bool:
        """Whether the shared store answered the last membership read."""
        ...
