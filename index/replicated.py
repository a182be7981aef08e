"""A gateway's index in a multi-node deployment: membership from the shared (Redis) index, holdings
from an in-process replica that each worker's own event stream keeps true.

- **Lookups are local**: the replica answers (no I/O, microseconds), so a slow, unreachable or
  emptied Redis never costs cache routing; the replica's entries still expire on time.
- **Membership is shared**: the workers come from the shared index (registered, heartbeating,
  signed); the feed follows each one's address. When Redis is down or has lost its data, the
  workers this gateway follows itself stay routable, so no request fails for lack of an index.
- **Failures stay local**: :meth:`purge` (a failed call) drops the worker from this replica only
  (it resyncs from its stream); only heartbeat expiry or the worker's own epoch-fenced writes change
  what other gateways see.
- **Hints are shared**: :meth:`add_pending` records locally and in the shared index.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import replace

from kvgate.index.base import PrefixIndex
from kvgate.index.event_feed import EventFeed
from kvgate.index.memory import MemoryPrefixIndex
from kvgate.index.types import ApplyResult, IndexUnavailableError, LookupResult, WorkerStatus
from kvgate.proto.events import EventBatch, Snapshot
from kvgate.proto.ids import ChunkHash, Epoch, WorkerId
from kvgate.proto.trust import record_verified
from kvgate.proto.workers import WorkerInfo, WorkerLoad


class ReplicatedIndex:
    """:class:`PrefixIndex` over ``shared`` (the authority; closed with this one) and ``replica``,
    which ``feed`` fills (owned here: :meth:`close` stops it). Only workers whose records are signed
    with ``secret`` (the deployment's) are followed: a record anyone wrote into Redis gets no
    connection. Worker-side calls (register, apply, ...) go to ``shared``; a gateway makes only the
    routing calls."""

    def __init__(
        self,
        shared: PrefixIndex,
        replica: MemoryPrefixIndex,
        feed: EventFeed,
        secret: bytes,
        shared_refresh_s: float = 1.0,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._shared = shared
        self._replica = replica
        self._feed = feed
        self._secret = secret
        self._refresh_s = shared_refresh_s
        self._now = monotonic
        self._listed: list[WorkerStatus] | None = None  # the shared index's last answer
        self._reachable = False
        self._listed_at = -math.inf

    # -- routing ------------------------------------------------------------------------------

    async def lookup(self, hashes: Sequence[ChunkHash]) -> LookupResult:
        return await self._replica.lookup(hashes)

    async def add_pending(
        self, hashes: Sequence[ChunkHash], worker_id: WorkerId, wait_s: float = 0.0
    ) -> None:
        await self._replica.add_pending(hashes, worker_id, wait_s)
        await self._shared.add_pending(hashes, worker_id, wait_s)

    async def purge(self, worker_id: WorkerId) -> int:
        """Drops the worker's holdings from this replica only, and re-reads them from its stream."""
        dropped = await self._replica.purge(worker_id)
        await self._feed.resubscribe(worker_id)
        return dropped

    async def workers(self) -> list[WorkerStatus]:
        """The shared index's live workers (asked at most every ``shared_refresh_s``; not
        :attr:`~WorkerStatus.followed`) and those this gateway's feed follows, whose status (load
        pushed by the worker, up to 10 Hz) wins; the
        followed ones alone while the shared index is unavailable. Follows every listed worker's
        address; stops following one that is neither listed nor reachable."""
        merged = {s.info.worker_id: s for s in await self._listing() or ()}
        merged.update((s.info.worker_id, s) for s in await self._replica.workers())
        return sorted(merged.values(), key=_worker_id)

    @property
    def shared_reachable(self) -> bool:
        """Whether the shared index answered the last membership read (False before the first)."""
        return self._reachable

    async def _listing(self) -> list[WorkerStatus] | None:
        if self._now() - self._listed_at < self._refresh_s:
            return self._listed
        self._listed_at = self._now()
        try:
            # a listed worker's holdings are this replica's business only once its stream is synced
            self._listed = [replace(s, followed=False) for s in await self._shared.workers()]
        except IndexUnavailableError:
            self._listed, self._reachable = None, False
            return None
        self._reachable = True
        for status in self._listed:
            if record_verified(status.info, self._secret):
                self._feed.follow(status.info.address)
        await self._forget(self._listed)
        return self._listed

    async def _forget(self, shared: list[WorkerStatus]) -> None:
        listed = {s.info.address for s in shared}
        for address in self._feed.addresses:
            if address not in listed and not self._feed.states[address].synced:
                await self._feed.unfollow(address)

    # -- the workers' side (the shared index's) ------------------------------------------------

    async def register(self, info: WorkerInfo, load: WorkerLoad) -> None:
        await self._shared.register(info, load)

    async def heartbeat(self, worker_id: WorkerId, epoch: Epoch, load: WorkerLoad) -> bool:
        return await self._shared.heartbeat(worker_id, epoch, load)

    async def deregister(self, worker_id: WorkerId, epoch: Epoch) -> None:
        await self._shared.deregister(worker_id, epoch)

    async def apply(self, batch: EventBatch) -> ApplyResult:
        return await self._shared.apply(batch)

    async def resync(self, snapshot: Snapshot) -> ApplyResult:
        return await self._shared.resync(snapshot)

    async def close(self) -> None:
        await self._feed.close()
        await self._replica.close()
        await self._shared.close()


def _worker_id(status: WorkerStatus) -> str:
    return status.info.worker_id
