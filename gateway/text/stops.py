"""Stop strings on a text stream: never emit a stop string, nor a prefix of one that may complete."""

from __future__ import annotations

from collections.abc import Sequence


class StopTrimmer:
    """Feeds text deltas through; holds back the tail that could still become a stop string.

    After a stop string is seen, :attr:`matched` names it and nothing more is emitted (the worker,
    which checks stop strings too, ends the generation; the text after the stop is never shown).
    Mutable, one per sequence.
    """

    def __init__(self, stops: Sequence[str]) -> None:
        self._stops = tuple(s for s in stops if s)
        self._hold = max((len(s) for s in self._stops), default=1) - 1
        self._pending = ""
        self.matched: str | None = None

    def feed(self, text: str) -> str:
        """The part of everything fed so far that is safe to emit now."""
        if self.matched is not None:
            return ""
        self._pending += text
        cut = self._first_stop()
        if cut is not None:
            out, self._pending = self._pending[:cut], ""
            return out
        keep = self._held_tail()
        out, self._pending = (
            self._pending[: len(self._pending) - keep],
            self._pending[len(self._pending) - keep :],
        )
        return out

    def flush(self) -> str:
        """What was held back, at the end of the stream (no stop string can complete any more)."""
        out, self._pending = ("" if self.matched else self._pending), ""
        return out

    def _first_stop(self) -> int | None:
        found = [(i, s) for s in self._stops if (i := self._pending.find(s)) >= 0]
        if not found:
            return None
        index, stop = min(found)
        self.matched = stop
        return index

    def _held_tail(self) -> int:
        """Length of the longest tail of the pending text that is a proper prefix of a stop."""
        for size in range(min(self._hold, len(self._pending)), 0, -1):
            tail = self._pending[-size:]
            if any(s.startswith(tail) for s in self._stops):
                return size
        return 0
