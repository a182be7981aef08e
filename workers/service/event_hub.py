"""``EventHub``: fans the worker's event stream out to its subscribers, each with a bounded queue.

Every subscription starts with a snapshot (taken from the hub's :class:`HoldingsMirror`), then gets
each item in order; one that asked for them also gets the worker's :class:`Admission` hints, in
order with the items (not numbered, never part of a snapshot: a lagging subscriber loses them). A
subscriber that falls ``queue_size`` items behind loses its queue and gets a fresh snapshot next
instead: memory per subscriber stays bounded, and what it misses is covered by the snapshot (whose
seq the following items continue). Everything here runs on the event loop.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Sequence

from kvgate.proto.events import Admission, Snapshot
from kvgate.proto.ids import ChunkHash, Epoch, WorkerId
from kvgate.workers.service.holdings import EventItem, HoldingsMirror

StreamItem = EventItem | Admission
"""What a subscription hands out: a batch, a snapshot, or (when asked for) an admission hint."""


class Subscription:
    """One consumer's view of the stream. ``get`` returns the next item, None once the hub closed.

    Invariant: while ``_lagging`` the queue is empty and the next ``get`` returns a snapshot.
    """

    def __init__(self, hub: EventHub, queue_size: int, admissions: bool = False) -> None:
        self._hub = hub
        self._queue_size = queue_size
        self.admissions = admissions  # whether admission hints are queued here too
        self._items: deque[StreamItem] = deque()
        self._ready = asyncio.Event()
        self._lagging = True  # the first item is a snapshot
        self._closed = False
        self.overflows = 0  # times the queue overflowed (a snapshot replaced it)

    def push(self, item: StreamItem) -> None:
        """Queues ``item`` (called by the hub); on overflow drops the queue for a snapshot."""
        if self._closed:
            return
        if not self._lagging:
            if len(self._items) >= self._queue_size:
                self._items.clear()
                self._lagging = True
                self.overflows += 1
            else:
                self._items.append(item)
        self._ready.set()

    async def get(self) -> StreamItem | None:
        """The next item (a snapshot first, and after an overflow); None when the stream ended."""
        while True:
            if self._lagging:
                return None if self._closed else self.resnapshot()
            if self._items:
                return self._items.popleft()
            if self._closed:
                return None
            self._ready.clear()
            await self._ready.wait()

    def resnapshot(self) -> Snapshot:
        """Drops whatever is queued and returns a snapshot of now, which the next item continues."""
        self._items.clear()
        self._lagging = False
        return self._hub.snapshot()

    def close(self) -> None:
        """Ends the subscription (queued items are still returned, then None). Idempotent."""
        self._closed = True
        self._ready.set()
        self._hub.unsubscribe(self)

    def __enter__(self) -> Subscription:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class EventHub:
    """Owned by the worker's composition root; fed by the engine loop's ``on_events``."""

    def __init__(self, worker_id: WorkerId, epoch: Epoch, queue_size: int = 1024) -> None:
        if queue_size < 1:
            raise ValueError(f"queue_size must be >= 1, got {queue_size}")
        self._mirror = HoldingsMirror(worker_id, epoch)
        self._queue_size = queue_size
        self._subscriptions: set[Subscription] = set()
        self._closed = False

    @property
    def subscribers(self) -> int:
        return len(self._subscriptions)

    def publish(self, items: Sequence[EventItem]) -> None:
        """Applies ``items`` to the mirror and queues them for every subscriber."""
        for item in items:
            self._mirror.apply(item)
            for subscription in self._subscriptions:
                subscription.push(item)

    def admit(self, admission: Admission) -> None:
        """Queues ``admission`` for every subscriber that asked for admissions (the mirror is not
        changed: an admission is a hint, not a holding)."""
        for subscription in self._subscriptions:
            if subscription.admissions:
                subscription.push(admission)

    def held_run(self, chunks: Sequence[ChunkHash]) -> int:
        """How many of ``chunks`` (a prompt's, in chain order) the worker holds from the first on,
        as of the last published item."""
        return self._mirror.held_run(chunks)

    def snapshot(self) -> Snapshot:
        """What the worker holds as of the last published item."""
        return self._mirror.snapshot()

    def subscribe(self, queue_size: int | None = None, admissions: bool = False) -> Subscription:
        """A new subscription (first item: a snapshot; with ``admissions``, admission hints too);
        closed at once when the hub is closed."""
        subscription = Subscription(self, queue_size or self._queue_size, admissions)
        if self._closed:
            subscription.close()
        else:
            self._subscriptions.add(subscription)
        return subscription

    def unsubscribe(self, subscription: Subscription) -> None:
        self._subscriptions.discard(subscription)

    def close(self) -> None:
        """Ends every subscription (the incarnation is over); later ones end at once. Idempotent."""
        self._closed = True
        for subscription in list(self._subscriptions):
            subscription.close()
