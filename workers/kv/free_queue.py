"""The free blocks of one tier that still hold a cached block: LRU order plus an expiry heap."""

from __future__ import annotations

import heapq
from collections import OrderedDict

from kvgate.workers.kv.block import KVBlock
from kvgate.workers.kv.types import BlockId

_COMPACT_SLACK = 64


class FreeBlockQueue:
    """Unreferenced cached blocks, evictable. The head is the least recently freed.

    Blocks are appended when their last user frees them (a sequence frees its blocks tail first, so a
    chain's tail is evicted before its head). A block's expiry does not change while it is queued, so
    heap entries ``(expires_at_ms, block_id)`` are checked lazily against the queue on pop.
    """

    def __init__(self) -> None:
        self._lru: OrderedDict[BlockId, KVBlock] = OrderedDict()
        self._heap: list[tuple[int, BlockId]] = []

    def __len__(self) -> int:
        return len(self._lru)

    def __contains__(self, block: KVBlock) -> bool:
        return self._lru.get(block.block_id) is block

    def ids(self) -> list[BlockId]:
        """Queued block ids, next victim first (pure)."""
        return list(self._lru)

    def push(self, block: KVBlock) -> None:
        """Appends ``block`` (not queued) as the most recently used."""
        self._lru[block.block_id] = block
        heapq.heappush(self._heap, (block.expires_at_ms, block.block_id))
        if len(self._heap) > 2 * len(self._lru) + _COMPACT_SLACK:
            self._compact()

    def remove(self, block: KVBlock) -> None:
        """Takes ``block`` out; a no-op when it is not queued (its heap entry goes stale)."""
        if block in self:
            del self._lru[block.block_id]

    def pop_lru(self) -> KVBlock | None:
        """Removes and returns the least recently used block; None when empty."""
        if not self._lru:
            return None
        return self._lru.popitem(last=False)[1]

    def pop_expired(self, now_ms: int) -> KVBlock | None:
        """Removes and returns the queued block that expired first, if its expiry is <= ``now_ms``."""
        while self._heap and self._heap[0][0] <= now_ms:
            expires, block_id = heapq.heappop(self._heap)
            block = self._lru.get(block_id)
            if block is not None and block.expires_at_ms == expires:
                del self._lru[block_id]
                return block
        return None

    def _compact(self) -> None:
        # Drops stale heap entries, so memory stays O(queued blocks) however many pushes went by.
        self._heap = [(b.expires_at_ms, i) for i, b in self._lru.items()]
        heapq.heapify(self._heap)
