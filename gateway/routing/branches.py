"""Where the prompts a gateway has seen part ways: the key of a prompt's own content.

Many prompts open alike (a system prompt, a shared document) and then go their own ways; the turns of
one conversation extend each other. A gateway that records, for each chunk, the chunk that followed
it -- or that two different ones did -- finds in any prompt the deepest point where prompts it has
seen branched: what follows is this prompt's own content, the same for every later turn of its
conversation, and (for shared openings that are common enough to have branched at every gateway) the
same at every gateway.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from itertools import pairwise

from kvgate.proto.ids import ChunkHash

_BRANCH = ChunkHash(b"")  # two different chunks followed this one


class PrefixBranches:
    """chunk -> the chunk that followed it in every prompt recorded, or a branch mark once two
    differed; at most ``max_entries`` chunks (least recently recorded dropped first). About 150 B
    per entry."""

    def __init__(self, max_entries: int = 200_000) -> None:
        if max_entries < 1:
            raise ValueError("max_entries must be >= 1")
        self._max = max_entries
        self._next: OrderedDict[ChunkHash, ChunkHash] = OrderedDict()

    def own_start(self, hashes: Sequence[ChunkHash]) -> int:
        """The index of the first chunk of ``hashes`` after the deepest recorded branch point (0
        when none of its chunks branched): where its own content begins. Pure."""
        start = 0
        for i, h in enumerate(hashes[:-1]):
            if self._next.get(h) is _BRANCH:
                start = i + 1
        return start

    def record(self, hashes: Sequence[ChunkHash]) -> None:
        """Notes that each chunk of ``hashes`` was followed by the next one."""
        for h, after in pairwise(hashes):
            seen = self._next.get(h)
            if seen is None:
                self._next[h] = after
            elif seen is not _BRANCH and seen != after:
                self._next[h] = _BRANCH
            self._next.move_to_end(h)
        while len(self._next) > self._max:
            self._next.popitem(last=False)

    def __len__(self) -> int:
        return len(self._next)
