"""Warm-ups: copies of a hot shared opening made off the request path, on an idle worker.

A popular opening -- a system prompt, an agent kind's tool definitions, a document many users read --
is served from the workers that hold it. Spreading its requests over more workers means copying it,
and a copy made by a request makes that request recompute the opening. When the opening's demand calls
for more holders than it has, the router instead asks an idle worker to prefill the opening alone, at
background priority (the engine gives such a prefill only what its steps leave, and every other
request overtakes it): the next requests find one more holder, and none of them paid for the copy.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Callable, Collection

from kvgate.gateway.routing.config import RoutingConfig
from kvgate.gateway.routing.fleet import Fleet
from kvgate.gateway.routing.types import SharedPrefix, WarmUp
from kvgate.proto.ids import ChunkHash, WorkerId


class WarmUpPlanner:
    """Decides warm-ups (:meth:`plan`) and remembers when each opening was last warmed, at most
    ``max_entries`` openings (the least recently warmed forgotten first)."""

    def __init__(
        self, config: RoutingConfig, monotonic: Callable[[], float], max_entries: int = 10_000
    ) -> None:
        if max_entries < 1:
            raise ValueError("max_entries must be >= 1")
        self._config = config
        self._now = monotonic
        self._max = max_entries
        self._last: OrderedDict[ChunkHash, float] = OrderedDict()

    def plan(
        self,
        opening_end: ChunkHash,
        shared: SharedPrefix,
        full: float,
        fleet: Fleet,
        holders: Collection[WorkerId],
        intake: Callable[[WorkerId], float],
    ) -> WarmUp | None:
        """A warm-up of the opening ``shared`` (ending at chunk ``opening_end``), or None.

        ``full``: how full the caches are (:func:`.cost.fullness`); ``holders``: the workers that
        hold the opening or will (pending there, or just chosen for the request); ``intake``: new
        content each worker took lately. The opening wants one more holder (:meth:`_wanted`): by
        demand, or (``warm_busy`` > 0) because every holder is busy; then the idle worker (queue
        under ``warm_idle_s``) that holds none of it and took the least new content is asked, unless
        this opening was warmed in the last ``warm_cooldown_s``. Off while ``warm_demand`` is 0, for
        an opening under ``warm_min_tokens`` and for one that no worker holds yet. Records the
        warm-up it returns."""
        config = self._config
        if not config.warm_demand or shared.tokens < config.warm_min_tokens or not holders:
            return None
        if not self._wanted(shared, full, fleet, holders) or self._cooling(opening_end):
            return None
        idle = [
            c.worker_id
            for c, queue_s in zip(fleet.candidates, fleet.queue_s, strict=True)
            if queue_s < config.warm_idle_s and c.worker_id not in holders
        ]
        if not idle:
            return None
        target = min(idle, key=intake)  # candidates are sorted by id: ties go to the lowest
        self._record(opening_end)
        return WarmUp(target, shared.tokens)

    def _wanted(self, shared: SharedPrefix, full: float, fleet: Fleet, holders: Collection[WorkerId]) -> bool:
        """Whether the opening wants a holder more than ``holders``. By demand: it wants 1 + ``uses``
        x ``worth`` x (1 - ``full``) / ``warm_demand`` holders. By load (``warm_busy`` F > 0): the
        least queue among its holders (those in ``fleet``) exceeds F x the opening's own prefill
        seconds / (1 - ``full``) -- the next request for it would start sooner by copying it than
        by waiting, and the copy is dearer the fuller the caches (never into full ones)."""
        config = self._config
        wanted = 1 + math.floor(shared.uses * shared.worth * (1 - full) / config.warm_demand)
        if len(holders) < wanted:
            return True
        if not config.warm_busy or full >= 1:
            return False
        queues = [fleet.queue_s[i] for w in holders if (i := fleet.position.get(w)) is not None]
        copy_s = shared.tokens / config.prefill_tokens_per_s / (1 - full)
        return bool(queues) and min(queues) > config.warm_busy * copy_s

    def _cooling(self, opening_end: ChunkHash) -> bool:
        last = self._last.get(opening_end)
        return last is not None and self._now() - last < self._config.warm_cooldown_s

    def _record(self, opening_end: ChunkHash) -> None:
        self._last[opening_end] = self._now()
        self._last.move_to_end(opening_end)
        while len(self._last) > self._max:
            self._last.popitem(last=False)
