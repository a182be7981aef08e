"""A monotonic clock for tests: a callable returning ``now``, which the test sets."""

from __future__ import annotations


class FakeMonotonic:
    def __init__(self, start: float = 0.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now
