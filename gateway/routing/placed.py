"""New content this gateway placed on each worker recently: where future requests will follow.

A prompt's uncached tokens become the worker's to serve again: a conversation's next turns, the
next readers of a document, an agent's next steps all follow the chunks to where they were
computed. A worker that took much new content lately will be asked for it again; a worker that
took little has room to take more. This is the router's own record, decayed with a half-life
(each gateway replica sees a random share of the traffic, so its shares estimate the fleet's).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from kvgate.proto.ids import WorkerId

_REBASE = 50.0  # natural-log units of growth before the weights are scaled back (exp(50) ~ 5e21)


class PlacedContent:
    """Decayed sums of uncached prompt tokens routed, per worker.

    Every sum decays at the same rate, so their ratios do not change between additions: a token
    added at ``t`` is stored with weight ``exp(rate x (t - base))``, and shares are ratios of the
    stored sums, with no decay to compute per worker on a lookup."""

    def __init__(self, half_life_s: float, monotonic: Callable[[], float]) -> None:
        if half_life_s <= 0:
            raise ValueError("half_life_s must be positive")
        self._rate = math.log(2) / half_life_s
        self._now = monotonic
        self._base = monotonic()
        self._sums: dict[WorkerId, float] = {}

    def add(self, worker_id: WorkerId, tokens: int) -> None:
        if tokens <= 0:
            return
        growth = self._rate * (self._now() - self._base)
        if growth > _REBASE:
            scale = math.exp(-growth)
            self._sums = {w: s * scale for w, s in self._sums.items() if s * scale > 1e-12}
            self._base, growth = self._now(), 0.0
        self._sums[worker_id] = self._sums.get(worker_id, 0.0) + tokens * math.exp(growth)

    def shares(self, workers: Sequence[WorkerId]) -> tuple[float, ...]:
        """Each worker's decayed sum over the largest among ``workers`` (0.0 to 1.0; all 0.0 when
        none took any)."""
        sums = [self._sums.get(w, 0.0) for w in workers]
        top = max(sums, default=0.0)
        return tuple(s / top for s in sums) if top > 0 else (0.0,) * len(sums)

    def forget(self, worker_id: WorkerId) -> None:
        self._sums.pop(worker_id, None)
