"""A bounded least-recently-used map from a piece of text to its token ids.

Bounded in bytes, not entries: a piece may be one newline or a 100 KB system prompt. An entry is charged
the size of its text object, of its ids and ``ENTRY_OVERHEAD`` (the dict slot, the array header).
"""

from __future__ import annotations

import sys
import threading
from collections import OrderedDict

from kvgate.common.tokenizer.tokenizer import TokenIds

DEFAULT_CAPACITY_BYTES = 64 * 1024 * 1024  # ~250 distinct 32k-token system prompts (text + ids)
ENTRY_OVERHEAD = 200  # bytes per entry besides its text and ids: OrderedDict node, ndarray header


class SegmentCache:
    """Text -> read-only token ids, evicting the least recently used past ``capacity_bytes``.

    Thread-safe (one lock, held only for dict operations). One per tokenizer: ids of one tokenizer mean
    nothing to another. ``capacity_bytes`` 0 disables it (``put`` keeps nothing)."""

    def __init__(self, capacity_bytes: int = DEFAULT_CAPACITY_BYTES) -> None:
        if capacity_bytes < 0:
            raise ValueError("capacity_bytes must be >= 0")
        self.capacity_bytes = capacity_bytes
        self._entries: OrderedDict[str, TokenIds] = OrderedDict()
        self._lock = threading.Lock()
        self.nbytes = 0  # the charge of the entries held; never above capacity_bytes
        self.hits = 0
        self.misses = 0

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, text: str) -> TokenIds | None:
        """The ids stored for exactly ``text`` (marked most recently used), None if absent."""
        with self._lock:
            ids = self._entries.get(text)
            if ids is None:
                self.misses += 1
                return None
            self._entries.move_to_end(text)
            self.hits += 1
            return ids

    def put(self, text: str, ids: TokenIds) -> None:
        """Stores ``ids`` for ``text`` (made read-only, not copied), evicting the least recently used
        entries to fit. An entry larger than the whole capacity is not stored. Idempotent."""
        cost = entry_cost(text, ids)
        if cost > self.capacity_bytes:
            return
        ids.flags.writeable = False
        with self._lock:
            old = self._entries.pop(text, None)
            if old is not None:
                self.nbytes -= entry_cost(text, old)
            while self._entries and self.nbytes + cost > self.capacity_bytes:
                evicted_text, evicted_ids = self._entries.popitem(last=False)
                self.nbytes -= entry_cost(evicted_text, evicted_ids)
            self._entries[text] = ids
            self.nbytes += cost


def entry_cost(text: str, ids: TokenIds) -> int:
    """Bytes charged for one entry."""
    return sys.getsizeof(text) + ids.nbytes + ENTRY_OVERHEAD
