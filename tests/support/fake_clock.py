"""Clocks for tests: a monotonic one the test sets, and a wall clock that is off by a fixed amount."""

from __future__ import annotations

from kvgate.common.clock import SystemClock


class FakeMonotonic:
    def __init__(self, start: float = 0.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now


class SkewedClock:
    """The wall clock, ``offset_ms`` off: a machine whose clock is wrong."""

    def __init__(self, offset_ms: int) -> None:
        self.offset_ms = offset_ms

    def now_ms(self) -> int:
        return SystemClock().now_ms() + self.offset_ms
