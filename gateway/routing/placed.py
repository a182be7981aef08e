"""New content this gateway placed on each worker recently: where future requests will follow.

A prompt's uncached tokens become the worker's to serve again: a conversation's next turns, the
next readers of a document, an agent's next steps all follow the chunks to where they were
computed. A worker that took much new content lately will be asked for it again; a worker that
took little has room to take more. This is the router's own record, decayed with a half-life
(each gateway replica sees a random share of the traffic, so its shares estimate the fleet's).
"""

from __future__ import annotations

import math
from collections.abc import Callable

from kvgate.proto.ids import WorkerId

_REBASE = 50.0  # natural-log units of growth before the weights are scaled back (exp(50) ~ 5e21)


class PlacedContent:
    """Decayed sums of uncached prompt tokens routed, per worker.

    Every sum decays at the same rate, so their ratios do not change between additions: a token
    added at ``t`` is stored with weight ``exp(rate x (t - base))``, and a share is the ratio of two
    stored sums (the worker's and the largest, kept up to date): O(1) per lookup, no decay to
    compute."""

    def __init__(self, half_life_s: float, monotonic: Callable[[], float]) -> None:
        if half_life_s <= 0:
            raise ValueError("half_life_s must be positive")
        self._rate = math.log(2) / half_life_s
        self._now = monotonic
        self._base = monotonic()
        self._sums: dict[WorkerId, float] = {}
        self._top = 0.0

    def add(self, worker_id: WorkerId, tokens: int) -> None:
        if tokens <= 0:
            return
        growth = self._rate * (self._now() - self._base)
        if growth > _REBASE:
            scale = math.exp(-growth)
            self._sums = {w: s * scale for w, s in self._sums.items() if s * scale > 1e-12}
            self._top = max(self._sums.values(), default=0.0)
            self._base, growth = self._now(), 0.0
        total = self._sums[worker_id] = self._sums.get(worker_id, 0.0) + tokens * math.exp(growth)
        self._top = max(self._top, total)

    def share(self, worker_id: WorkerId) -> float:
        """The worker's decayed sum over the largest any worker has (0.0 to 1.0; 0.0 when none
        took any)."""
        return self._sums.get(worker_id, 0.0) / self._top if self._top > 0 else 0.0

    def rate(self, worker_id: WorkerId) -> float:
        """Tokens per second the worker took lately: its decayed sum over the decay's mean life
        (an exponentially weighted rate; 0.0 when it took none)."""
        stored = self._sums.get(worker_id, 0.0)
        return stored * self._rate * math.exp(-self._rate * (self._now() - self._base)) if stored else 0.0

    def forget(self, worker_id: WorkerId) -> None:
        if self._sums.pop(worker_id, None) is not None:
            self._top = max(self._sums.values(), default=0.0)
