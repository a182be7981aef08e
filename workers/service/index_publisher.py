"""``IndexPublisher``: keeps the worker's entry in a shared :class:`PrefixIndex` (Redis in multi-node
mode) true: register, heartbeat with the load, apply every event batch, deregister at the end.

One task does all index writes, in order, so a heartbeat never races a registration. The index may go
away at any time (``IndexUnavailableError``: Redis down or slow): the worker keeps serving, the
publisher retries with capped backoff, and once the index answers again it re-registers if the index
forgot the worker and resyncs with a snapshot (the events it missed meanwhile are covered by it, and
its bounded subscription never grows while it waits). A GAP or an unknown worker is healed the same
way. An index that knows a newer epoch of this worker (``StaleEpochError``) means this incarnation is
superseded: the publisher stops writing; so does one whose id and epoch another process registered first
(``DuplicateWorkerError``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable

from kvgate.common.bounded_stop import stop_within
from kvgate.index.base import PrefixIndex
from kvgate.index.types import (
    ApplyResult,
    ApplyStatus,
    DuplicateWorkerError,
    IndexUnavailableError,
    StaleEpochError,
)
from kvgate.proto.events import Admission, Snapshot
from kvgate.proto.workers import WorkerInfo, WorkerLoad
from kvgate.workers.service.event_hub import EventHub, Subscription
from kvgate.workers.service.holdings import EventItem

log = logging.getLogger(__name__)
_TASK_END_S = 2.0  # how long a cancelled publisher task may take to end (an index call in flight)


class IndexPublisher:
    """Owned by the worker's composition root: :meth:`start` creates its task, :meth:`stop` ends it.

    ``load`` returns the current load figures (called on the event loop); ``heartbeat_s`` must be well
    under the index's ``heartbeat_ttl_s``; ``retry_s`` = (first, most) seconds between retries.
    """

    def __init__(
        self,
        index: PrefixIndex,
        info: WorkerInfo,
        load: Callable[[], WorkerLoad],
        hub: EventHub,
        *,
        heartbeat_s: float = 1.0,
        retry_s: tuple[float, float] = (0.05, 1.0),
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._index, self._info, self._load, self._hub = index, info, load, hub
        self._heartbeat_s, self._retry_s, self._now = heartbeat_s, retry_s, monotonic
        self._subscription: Subscription | None = None
        self._task: asyncio.Task[None] | None = None
        self.registered = False  # the index knows this incarnation (as far as we know)
        self.in_sync = False  # the index holds what the worker holds, up to the last item applied
        self.superseded = False  # a newer epoch is registered: this publisher gave up
        self.failures = 0  # index calls that failed (IndexUnavailableError), for metrics and tests
        self._next_heartbeat = 0.0

    @property
    def degraded(self) -> bool:
        """True while the index does not reflect this worker (down, or not yet resynced)."""
        return not (self.registered and self.in_sync)

    def start(self) -> None:
        """Subscribes to the hub and starts the task (on the running event loop)."""
        self._subscription = self._hub.subscribe()
        self._task = asyncio.create_task(self._run(), name=f"kvgate-index-publisher-{self._info.worker_id}")

    async def stop(self, *, deregister: bool = True) -> None:
        """Ends the task; then, if asked and registered, removes the worker from the index (best
        effort: an unavailable index just lets the heartbeat lapse). Idempotent."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await stop_within("the index publisher's task", self._task, _TASK_END_S)
            self._task = None
        if self._subscription is not None:
            self._subscription.close()
        if deregister and self.registered and not self.superseded:
            with contextlib.suppress(IndexUnavailableError):
                await self._index.deregister(self._info.worker_id, self._info.epoch)
            self.registered = False

    async def _run(self) -> None:
        delay = self._retry_s[0]
        while True:
            try:
                await self._step()
                delay = self._retry_s[0]
            except IndexUnavailableError as exc:
                self._on_unavailable(exc)
                await asyncio.sleep(delay)
                delay = min(delay * 2, self._retry_s[1])
            except DuplicateWorkerError as exc:
                log.error("worker %s not registered: %s", self._info.worker_id, exc)
                self.superseded = True
                return
            except StaleEpochError as exc:
                log.error("worker %s superseded (the index has a newer epoch): %s", self._info.worker_id, exc)
                self.superseded = True
                return

    async def _step(self) -> None:
        """One unit of work: register, resync, heartbeat, or publish the next item."""
        if not self.registered:
            await self._register()
        elif not self.in_sync:
            await self._resync()
        elif self._now() >= self._next_heartbeat:
            await self._heartbeat()
        elif (item := await self._next_item()) is not None:
            await self._publish(item)

    async def _register(self) -> None:
        await self._index.register(self._info, self._load())
        self.registered, self.in_sync = True, False
        self._next_heartbeat = self._now() + self._heartbeat_s
        log.info("worker %s (epoch %d) registered in the index", self._info.worker_id, self._info.epoch)

    async def _resync(self) -> None:
        assert self._subscription is not None
        self._on_result(await self._index.resync(self._subscription.resnapshot()))

    async def _heartbeat(self) -> None:
        self._next_heartbeat = self._now() + self._heartbeat_s
        if not await self._index.heartbeat(self._info.worker_id, self._info.epoch, self._load()):
            self.registered = False  # the index forgot us (e.g. Redis restarted empty)

    async def _next_item(self) -> EventItem | None:
        """The next stream item, or None when the next heartbeat is due first (or the hub closed:
        then only heartbeats are left to do until the owner stops this publisher)."""
        assert self._subscription is not None
        timeout = max(0.0, self._next_heartbeat - self._now())
        try:
            async with asyncio.timeout(timeout):
                item = await self._subscription.get()
        except TimeoutError:
            return None
        if item is None:
            await asyncio.sleep(timeout)
        assert not isinstance(item, Admission)  # this subscription did not ask for admissions
        return item

    async def _publish(self, item: EventItem) -> None:
        if isinstance(item, Snapshot):
            self._on_result(await self._index.resync(item))
        else:
            self._on_result(await self._index.apply(item))

    def _on_result(self, result: ApplyResult) -> None:
        if result.status is ApplyStatus.STALE_EPOCH:
            raise StaleEpochError(f"{self._info.worker_id}: epoch {self._info.epoch} is stale")
        was_in_sync, self.in_sync = self.in_sync, result.ok
        self.registered = result.status is not ApplyStatus.UNKNOWN_WORKER
        if not result.ok:
            log.info("index answered %s for worker %s; resyncing", result.status.value, self._info.worker_id)
        elif not was_in_sync:
            log.info("worker %s in sync with the index", self._info.worker_id)

    def _on_unavailable(self, exc: IndexUnavailableError) -> None:
        if not self.degraded:
            log.warning("prefix index unavailable; worker %s keeps serving: %s", self._info.worker_id, exc)
        self.failures += 1
        self.in_sync = False
