"""Progress of a weight load, as log lines (stderr through ``logging``; nothing is printed)."""

from __future__ import annotations

import logging
import time

log = logging.getLogger("kvgate.workers.model.load")


class LoadProgress:
    """Logs ``loading <what>: n/total tensors (p%)`` at INFO each time another tenth is done, and every
    tensor at DEBUG. Mutable; one per load."""

    def __init__(self, what: str, total: int) -> None:
        self.what, self.total, self.done = what, total, 0
        self._next_tenth = 1
        self._start = time.perf_counter()
        log.info("loading %s: %d tensors", what, total)

    def step(self, name: str) -> None:
        """Count one tensor (``name``) as loaded."""
        self.done += 1
        log.debug("loaded %s (%d/%d)", name, self.done, self.total)
        if self.done * 10 >= self._next_tenth * self.total:
            self._next_tenth = self.done * 10 // self.total + 1
            log.info(
                "loading %s: %d/%d tensors (%d%%, %.1f s)",
                self.what,
                self.done,
                self.total,
                100 * self.done // self.total,
                time.perf_counter() - self._start,
            )
