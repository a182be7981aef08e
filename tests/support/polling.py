"""Waiting for a condition, never for a fixed time: the test processes start slower on a busy machine."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def poll_until(check: Callable[[], T], timeout_s: float, what: str, every_s: float = 0.05) -> T:
    """``check()``'s first truthy value, polled every ``every_s``. Exceptions from ``check`` count as
    "not yet". After ``timeout_s``: RuntimeError naming ``what`` with the last value or exception."""
    deadline = time.monotonic() + timeout_s
    last: object = None
    while True:
        try:
            if value := check():
                return value
            last = value
        except Exception as exc:  # a process still starting refuses connections: not yet
            last = exc
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what}: not true after {timeout_s}s (last: {last!r})")
        time.sleep(every_s)


def start_with_retries(start_once: Callable[[], T], stop: Callable[[], None], attempts: int) -> T:
    """``start_once()``, retried (after ``stop()``) up to ``attempts`` times when it raises RuntimeError
    (ports taken meanwhile on a busy machine); the last failure propagates."""
    for attempt in range(attempts):
        try:
            return start_once()
        except RuntimeError:
            stop()
            if attempt == attempts - 1:
                raise
    raise ValueError("attempts must be positive")
