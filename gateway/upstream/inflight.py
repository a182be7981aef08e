"""The worker calls open now, so that calls to a worker that vanished are abandoned, not awaited.

A worker that stalls (process stopped, machine frozen, network partitioned) sends nothing: no token,
no error, and TCP keepalive takes long to notice. The index notices first: the worker's heartbeat
lapses, or the embedded feed's ``Stats`` call times out, and the worker leaves the directory. At
each directory refresh, :meth:`InFlight.abandon_lost` cancels a call when both have lasted
``grace_s``: its incarnation has been absent from the directory, and the call has been waiting for
the worker's next message (not for our consumer to read one). The dispatcher then re-routes the call
(no token sent yet) or ends it with a clear error.

So a call whose worker keeps sending is never abandoned, however the index sees the worker; and a
worker that is only briefly absent (purged after one failed call, back at its next heartbeat) keeps
its other calls.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection
from dataclasses import dataclass, field

import grpc

from kvgate.proto.ids import Epoch, WorkerId
from kvgate.proto.workers import WorkerInfo

Incarnation = tuple[WorkerId, Epoch]


@dataclass(slots=True, eq=False)
class Attempt:
    """One call to one worker incarnation. The dispatcher calls :meth:`awaiting` right before it
    waits for the worker's next message and :meth:`received` when one arrives; ``abandoned`` is set
    (and the call cancelled) by :meth:`InFlight.abandon_lost`."""

    info: WorkerInfo
    call: grpc.aio.Call
    awaiting_since: float | None = None
    abandoned: bool = field(default=False)

    @property
    def incarnation(self) -> Incarnation:
        return (self.info.worker_id, self.info.epoch)

    def awaiting(self, now_s: float) -> None:
        self.awaiting_since = now_s

    def received(self) -> None:
        self.awaiting_since = None


class InFlight:
    """Owned by the dispatcher; used from the event loop only (no locking)."""

    def __init__(self, grace_s: float = 2.0, monotonic: Callable[[], float] = time.monotonic) -> None:
        if grace_s < 0:
            raise ValueError("grace_s must be >= 0")
        self._grace_s = grace_s
        self._now = monotonic
        self._attempts: set[Attempt] = set()
        self._absent_since: dict[Incarnation, float] = {}

    def open(self, info: WorkerInfo, call: grpc.aio.Call) -> Attempt:
        attempt = Attempt(info, call)
        self._attempts.add(attempt)
        return attempt

    def close(self, attempt: Attempt) -> None:
        self._attempts.discard(attempt)

    def now(self) -> float:
        return self._now()

    def incarnations(self) -> list[WorkerInfo]:
        """The incarnations with calls open (their channels must stay open)."""
        unique = {(a.info.worker_id, a.info.epoch, a.info.address): a.info for a in self._attempts}
        return list(unique.values())

    def abandon_lost(self, known: Collection[Incarnation]) -> list[Attempt]:
        """Cancels the calls waiting ``grace_s`` on an incarnation absent from ``known`` for ``grace_s``
        (absence is tracked across calls of this method); returns them. Idempotent."""
        now = self._now()
        self._track_absence(known, now)
        lost = [a for a in self._attempts if not a.abandoned and self._gone(a, now)]
        for attempt in lost:
            attempt.abandoned = True
            attempt.call.cancel()
        return lost

    def _track_absence(self, known: Collection[Incarnation], now: float) -> None:
        open_now = {a.incarnation for a in self._attempts}
        absent = {i: self._absent_since.get(i, now) for i in open_now if i not in known}
        self._absent_since = absent

    def _gone(self, attempt: Attempt, now: float) -> bool:
        absent = self._absent_since.get(attempt.incarnation)
        waiting = attempt.awaiting_since
        if absent is None or waiting is None:
            return False
        return min(now - absent, now - waiting) >= self._grace_s

    def __len__(self) -> int:
        return len(self._attempts)
