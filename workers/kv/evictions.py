"""Recent chunk evictions, so that a worker can tell a router's misprediction from bad luck.

The gateway predicts a request's cached tokens from the index. When the worker reuses fewer, either the
index was stale (it claimed a chunk the worker no longer held, or never held, when the request arrived)
or the worker held the chunk when the request arrived and evicted it before admitting the request. The
worker tells the two apart with this record: every chunk that stopped being held gets the next
**eviction number**, and a request remembers the number current when the engine took it (its
:attr:`RecentEvictions.mark`); a chunk evicted after that mark was held when the request arrived.

Numbers instead of times: the record needs no clock and is exact within one engine thread. The record
is bounded (oldest forgotten first); a forgotten eviction reads as "not evicted since", which errs
towards blaming the index.
"""

from __future__ import annotations

from collections import OrderedDict

from kvgate.proto.ids import ChunkHash

MIN_CAPACITY = 1024


class RecentEvictions:
    """The last ``capacity`` chunks that stopped being held, each with its eviction number.

    Mutated only by the chunk tracker, on the engine thread. Eviction numbers start at 1; a chunk
    evicted again gets a new number (its latest eviction counts).
    """

    def __init__(self, capacity: int = MIN_CAPACITY) -> None:
        if capacity < 1:
            raise ValueError(f"capacity must be >= 1, got {capacity}")
        self._capacity = capacity
        self._numbers: OrderedDict[ChunkHash, int] = OrderedDict()
        self._count = 0

    def __len__(self) -> int:
        return len(self._numbers)

    @property
    def mark(self) -> int:
        """The number of the latest eviction (0: none yet); remember it to ask :meth:`evicted_since`."""
        return self._count

    def record(self, chunk: ChunkHash) -> None:
        """``chunk`` stopped being held, now. Forgets the oldest record beyond the capacity."""
        self._count += 1
        self._numbers.pop(chunk, None)
        self._numbers[chunk] = self._count
        if len(self._numbers) > self._capacity:
            self._numbers.popitem(last=False)

    def evicted_since(self, chunk: ChunkHash, mark: int) -> bool:
        """True when ``chunk``'s latest remembered eviction came after ``mark`` (pure)."""
        number = self._numbers.get(chunk)
        return number is not None and number > mark
