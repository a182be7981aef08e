"""Time sources. Everything that expires things takes a Clock, so tests can move time by hand."""

from __future__ import annotations

import time
from typing import Protocol


class Clock(Protocol):
    """Wall-clock milliseconds since the unix epoch (comparable across processes and nodes)."""

    def now_ms(self) -> int: ...


class SystemClock:
    """The real wall clock."""

    def now_ms(self) -> int:
        return time.time_ns() // 1_000_000


class ManualClock:
    """A clock that moves only when told to; for tests and the trace simulator."""

    def __init__(self, start_ms: int = 1_700_000_000_000) -> None:
        self._now_ms = start_ms

    def now_ms(self) -> int:
        return self._now_ms

    def advance(self, seconds: float) -> None:
        """Moves time forward by ``seconds`` (>= 0)."""
        if seconds < 0:
            raise ValueError("time only moves forward")
        self._now_ms += round(seconds * 1000)
