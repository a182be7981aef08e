"""How many requests went through each shared opening lately: what a copy of it would serve.

Keyed by the last chunk of the opening (where the prompts the router saw part ways, see
:mod:`.branches`); counts decay with a half-life, so a popular system prompt or tool block reads
high while it is in use and fades when it is not.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Callable

from kvgate.proto.ids import ChunkHash

_REBASE = 50.0  # natural-log units of growth before the counts are scaled back (exp(50) ~ 5e21)


class OpeningDemand:
    """Decayed request counts per opening, at most ``max_entries`` (least recently counted dropped
    first). A count added at ``t`` is stored with weight ``exp(rate x (t - base))``, so reads and
    additions are O(1) and nothing is decayed in place until the weights are rebased."""

    def __init__(
        self, half_life_s: float, monotonic: Callable[[], float], max_entries: int = 100_000
    ) -> None:
        if half_life_s <= 0:
            raise ValueError("half_life_s must be positive")
        if max_entries < 1:
            raise ValueError("max_entries must be >= 1")
        self._rate = math.log(2) / half_life_s
        self._now = monotonic
        self._base = monotonic()
        self._max = max_entries
        self._counts: OrderedDict[ChunkHash, float] = OrderedDict()

    def uses(self, opening_end: ChunkHash) -> float:
        """Requests counted through the opening ending at ``opening_end``, decayed to now. Pure."""
        stored = self._counts.get(opening_end, 0.0)
        return stored * math.exp(-self._rate * (self._now() - self._base)) if stored else 0.0

    def count(self, opening_end: ChunkHash) -> None:
        """One more request went through the opening ending at ``opening_end``."""
        growth = self._rate * (self._now() - self._base)
        if growth > _REBASE:
            scale = math.exp(-growth)
            self._counts = OrderedDict((h, c * scale) for h, c in self._counts.items() if c * scale > 1e-12)
            self._base, growth = self._now(), 0.0
        self._counts[opening_end] = self._counts.get(opening_end, 0.0) + math.exp(growth)
        self._counts.move_to_end(opening_end)
        while len(self._counts) > self._max:
            self._counts.popitem(last=False)

    def __len__(self) -> int:
        return len(self._counts)
