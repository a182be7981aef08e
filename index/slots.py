"""Small integer slots for worker ids: the bit positions of the holder bitmaps."""

from __future__ import annotations

from collections import deque

from kvgate.proto.ids import WorkerId


class SlotTable:
    """Gives each registered worker the lowest free slot; a freed slot is reused only
    ``reuse_after_ms`` after it was freed (hints that outlive their worker expire first).

    ``names[slot]`` is the slot's worker id ("" while free): the walk's output keys.
    """

    def __init__(self, reuse_after_ms: int) -> None:
        self._reuse_after_ms = reuse_after_ms
        self._freed: deque[tuple[int, int]] = deque()  # (freed at ms, slot), oldest first
        self._free: list[int] = []
        self.names: list[WorkerId] = []

    def take(self, worker_id: WorkerId, now_ms: int) -> int:
        """A slot for ``worker_id``."""
        while self._freed and self._freed[0][0] + self._reuse_after_ms <= now_ms:
            self._free.append(self._freed.popleft()[1])
        if self._free:
            self._free.sort()
            slot = self._free.pop(0)
            self.names[slot] = worker_id
            return slot
        self.names.append(worker_id)
        return len(self.names) - 1

    def free(self, slot: int, now_ms: int) -> None:
        """Gives ``slot`` back (its worker left)."""
        self.names[slot] = WorkerId("")
        self._freed.append((now_ms, slot))
