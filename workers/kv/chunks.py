"""Chunk-level view of the block pools: which published chunks the worker holds, in which tier.

A chunk (``chunk_size // block_size`` consecutive blocks of one chain) is **held** when all its blocks
are cached: in tier GPU when all are on the GPU, in tier CPU when some are on the CPU; its expiry is
the earliest of its blocks'. Its published hash is the gateway's ``chunk_hashes(ids, root,
chunk_size)[i]``, attached to the chunk's last block when that block is cached (see
:class:`~kvgate.workers.kv.block.BlockKey`). The tracker learns a chunk's member block hashes then,
and forgets the chunk once that last block has left every tier. A held chunk one of whose blocks is
dropped from the worker (not moved between tiers) is recorded in :attr:`ChunkTracker.evictions` at once,
even when the same step stores it again.
"""

from __future__ import annotations

from collections.abc import Callable

from kvgate.proto.events import Holding
from kvgate.proto.ids import ChunkHash, Tier
from kvgate.workers.kv.block import KVBlock
from kvgate.workers.kv.evictions import RecentEvictions
from kvgate.workers.kv.publisher import EventPublisher
from kvgate.workers.kv.types import BlockHash

Locate = Callable[[BlockHash], KVBlock | None]
"""The block cached under a hash in any tier (tiers are exclusive: at most one holds a hash)."""


class ChunkTracker:
    """Marks chunks dirty when one of their blocks changes and publishes their states on flush."""

    def __init__(self, locate: Locate, publisher: EventPublisher, evictions: RecentEvictions) -> None:
        self._locate = locate
        self._publisher = publisher
        self.evictions = evictions
        self._members: dict[ChunkHash, tuple[BlockHash, ...]] = {}
        # A block hash belongs to one chunk, unless hashes collide: hence a list.
        self._chunks_of: dict[BlockHash, list[ChunkHash]] = {}
        self._dirty: dict[ChunkHash, None] = {}  # insertion-ordered: events follow the order of changes

    def __len__(self) -> int:
        """Chunks tracked: after a flush, exactly those whose last block is cached in some tier."""
        return len(self._members)

    def __contains__(self, chunk: object) -> bool:
        """Whether ``chunk`` is tracked: as of the last flush, its last block is cached in some tier
        (its other blocks almost always are too)."""
        return chunk in self._members

    def add(self, chunk: ChunkHash, members: tuple[BlockHash, ...]) -> None:
        """Records that ``chunk`` consists of the blocks ``members`` (its last block was just cached)."""
        if chunk not in self._members:
            self._members[chunk] = members
            for block_hash in members:
                self._chunks_of.setdefault(block_hash, []).append(chunk)
        self._dirty[chunk] = None

    def touched(self, block_hash: BlockHash) -> None:
        """Block ``block_hash`` was cached, moved, refreshed or dropped: its chunk is to be republished."""
        for chunk in self._chunks_of.get(block_hash, ()):
            self._dirty[chunk] = None

    def dropping(self, block_hash: BlockHash) -> None:
        """Block ``block_hash``, still cached, is about to be dropped from the worker: every chunk it
        completes is held until now and then evicted. Call :meth:`touched` once it is gone."""
        for chunk in self._chunks_of.get(block_hash, ()):
            if self.holding(chunk) is not None:
                self.evictions.record(chunk)

    def flush(self) -> None:
        """Reports every dirty chunk's state to the publisher. Idempotent."""
        for chunk in self._dirty:
            self._publisher.update(chunk, self.holding(chunk))
            if self._locate(self._members[chunk][-1]) is None:
                self._forget(chunk)
        self._dirty.clear()

    def holding(self, chunk: ChunkHash) -> Holding | None:
        """``chunk``'s state recomputed from the pools; None when not held (pure)."""
        blocks = []
        for block_hash in self._members.get(chunk, ()):
            block = self._locate(block_hash)
            if block is None:
                return None
            blocks.append(block)
        if not blocks:
            return None
        tier = Tier.GPU if all(b.tier is Tier.GPU for b in blocks) else Tier.CPU
        return Holding(chunk, tier, min(b.expires_at_ms for b in blocks))

    def _forget(self, chunk: ChunkHash) -> None:
        for block_hash in self._members.pop(chunk):
            owners = self._chunks_of[block_hash]
            owners.remove(chunk)
            if not owners:
                del self._chunks_of[block_hash]
