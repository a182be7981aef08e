"""When calls are abandoned: only after their worker has been absent from the directory for the grace
period AND they have waited that long for its next message (fake clock, fake calls)."""

from __future__ import annotations

from dataclasses import dataclass

from kvgate.gateway.upstream.inflight import InFlight
from kvgate.proto.ids import Epoch, WorkerId
from kvgate.proto.workers import WorkerInfo
from tests.support.fake_clock import FakeMonotonic

W0 = WorkerInfo(WorkerId("w0"), Epoch(1), "127.0.0.1:1", "fp", "m")
KNOWN = {(W0.worker_id, W0.epoch)}


@dataclass
class FakeCall:
    cancelled: bool = False

    def cancel(self) -> bool:
        self.cancelled = True
        return True


def test_a_silent_call_on_a_worker_gone_for_the_grace_period_is_abandoned() -> None:
    clock = FakeMonotonic()
    inflight = InFlight(grace_s=1.0, monotonic=clock)
    attempt = inflight.open(W0, FakeCall())
    attempt.awaiting(0.0)
    clock.now = 0.5
    assert inflight.abandon_lost(set()) == []  # absent from 0.5 on
    clock.now = 1.2
    assert inflight.abandon_lost(set()) == []  # absent for 0.7 s only
    clock.now = 1.6
    assert inflight.abandon_lost(set()) == [attempt]
    assert attempt.call.cancelled
    assert attempt.abandoned
    assert inflight.abandon_lost(set()) == []  # once


def test_a_brief_absence_does_not_abandon_anything() -> None:
    """Purged after one failed call, back at the next heartbeat: the worker's other calls stay."""
    clock = FakeMonotonic()
    inflight = InFlight(grace_s=1.0, monotonic=clock)
    attempt = inflight.open(W0, FakeCall())
    attempt.awaiting(0.0)
    for now, known in ((0.5, set()), (1.0, KNOWN), (2.0, set()), (2.9, set()), (3.5, KNOWN), (5.0, KNOWN)):
        clock.now = now
        assert inflight.abandon_lost(known) == []
    assert not attempt.call.cancelled


def test_a_call_whose_consumer_is_slow_is_not_silent() -> None:
    """The worker sent a message that our consumer has not taken yet: nothing is awaited from the
    worker, so its absence from the directory does not matter."""
    clock = FakeMonotonic()
    inflight = InFlight(grace_s=1.0, monotonic=clock)
    attempt = inflight.open(W0, FakeCall())
    attempt.awaiting(0.0)
    attempt.received()
    for now in (0.5, 2.0, 10.0):
        clock.now = now
        assert inflight.abandon_lost(set()) == []


def test_closed_calls_are_forgotten() -> None:
    inflight = InFlight(grace_s=0.0, monotonic=FakeMonotonic())
    attempt = inflight.open(W0, FakeCall())
    assert [i.worker_id for i in inflight.incarnations()] == ["w0"]
    inflight.close(attempt)
    assert len(inflight) == 0
    assert inflight.abandon_lost(set()) == []
