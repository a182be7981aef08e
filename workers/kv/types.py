"""Typed ids and small value types of the worker's KV block manager (pure bookkeeping, torch-free)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import NewType

BlockId = NewType("BlockId", int)
"""Index of a block in ONE tier's pool, in ``[0, num_blocks)``; a GPU and a CPU block may share an id."""

BlockHash = NewType("BlockHash", bytes)
"""128-bit chained XXH3 digest of a full block and everything before it (``chunk_hashes`` with
``chunk_size = block_size``, from the request's root); equal hash means equal prefix, up to collisions."""

SeqId = NewType("SeqId", str)
"""The scheduler's name of one sequence (a request, or a request's n-th sample)."""

BlockPair = tuple[BlockId, BlockId]
"""``(src, dst)``: copy whole block ``src`` of one tier onto block ``dst`` of the other."""


@dataclass(frozen=True, slots=True)
class Pin:
    """A request's longer TTL class: keep the blocks overlapping its first ``tokens`` tokens cached for
    ``ttl_s`` seconds after each use (e.g. an Anthropic ``cache_control`` breakpoint with a 1 h TTL).

    A block that straddles the ``tokens`` boundary is pinned too, so every one of the first ``tokens``
    tokens is covered. ``ttl_s`` shorter than the manager's default TTL changes nothing.
    """

    tokens: int
    ttl_s: float

    def __post_init__(self) -> None:
        if self.tokens < 0 or self.ttl_s < 0:
            raise ValueError("a pin's tokens and ttl_s must be >= 0")
