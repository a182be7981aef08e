"""The worker calls streaming now, so that calls to a worker that vanished are abandoned, not awaited.

A worker that stalls (process stopped, machine frozen, network partitioned) sends nothing: no token,
no error, and TCP keepalive takes long to notice. The index notices first: the worker's heartbeat
lapses, or the embedded feed's ``Stats`` call times out, and the worker leaves the directory. At
each directory refresh, :meth:`InFlight.abandon_lost` cancels every call to an incarnation that is no
longer listed and has been silent for ``grace_s``; the dispatcher then re-routes it (no token sent
yet) or ends it with a clear error. A call that keeps streaming is never abandoned: its worker is
demonstrably alive, whatever the index says.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection
from dataclasses import dataclass, field

import grpc

from kvgate.proto.ids import Epoch, WorkerId
from kvgate.proto.workers import WorkerInfo


@dataclass(slots=True, eq=False)
class Attempt:
    """One call to one worker incarnation. ``touch`` on every message; ``abandoned`` is set (and the
    call cancelled) by :meth:`InFlight.abandon_lost`."""

    info: WorkerInfo
    call: grpc.aio.Call
    last_message_s: float
    abandoned: bool = field(default=False)

    def touch(self, now_s: float) -> None:
        self.last_message_s = now_s


class InFlight:
    """Owned by the dispatcher; used from the event loop only (no locking)."""

    def __init__(self, grace_s: float = 2.0, monotonic: Callable[[], float] = time.monotonic) -> None:
        if grace_s < 0:
            raise ValueError("grace_s must be >= 0")
        self._grace_s = grace_s
        self._now = monotonic
        self._attempts: set[Attempt] = set()

    def open(self, info: WorkerInfo, call: grpc.aio.Call) -> Attempt:
        attempt = Attempt(info, call, self._now())
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

    def abandon_lost(self, known: Collection[tuple[WorkerId, Epoch]]) -> list[Attempt]:
        """Cancels the calls to incarnations not in ``known`` that were silent for ``grace_s``;
        returns them. Idempotent."""
        now = self._now()
        lost = [
            a for a in self._attempts
            if not a.abandoned and (a.info.worker_id, a.info.epoch) not in known
            and now - a.last_message_s >= self._grace_s
        ]  # fmt: skip
        for attempt in lost:
            attempt.abandoned = True
            attempt.call.cancel()
        return lost

    def __len__(self) -> int:
        return len(self._attempts)
