"""One KV block's bookkeeping record (the tensors live in the engine; this is ids and metadata only)."""

from __future__ import annotations

from dataclasses import dataclass

from kvgate.proto.ids import ChunkHash, Tier
from kvgate.workers.kv.types import BlockHash, BlockId


@dataclass(frozen=True, slots=True)
class BlockKey:
    """What a full block's cache entry is keyed and verified by.

    ``hash`` covers ``parent || tokens``; a hit is reused only when ``parent`` and ``tokens`` equal the
    request's too, so a colliding ``hash`` can never hand out a wrong block. ``parent`` is the previous
    block's hash, or the request's root digest for block 0 (so tenants with different salts never
    share). ``tokens`` are the block's token ids as little-endian uint32 bytes. ``chunk`` is set on the
    last block of a full chunk: the gateway's hash of that chunk, which events publish.
    """

    hash: BlockHash
    parent: bytes
    tokens: bytes
    chunk: ChunkHash | None = None


@dataclass(slots=True, eq=False)
class KVBlock:
    """One block of one tier's pool; records are created once per pool and reused.

    Invariants (kept by :class:`~kvgate.workers.kv.block_pool.BlockPool`): ``key`` is set iff the
    block is in its pool's hash map (cached); ``ref_cnt`` counts the sequences whose block table holds
    it (for a CPU block: 1 while it is the source of a swap-in of the current step). ``expires_at_ms``
    and ``last_used_ms`` are unix ms and mean nothing while ``key`` is None. ``computing``: its KV is
    written by the current step's forward, so it is no hit before the step ends.
    """

    block_id: BlockId
    tier: Tier
    ref_cnt: int = 0
    key: BlockKey | None = None
    expires_at_ms: int = 0
    last_used_ms: int = 0
    computing: bool = False

    @property
    def hash(self) -> BlockHash | None:
        return None if self.key is None else self.key.hash

    def matches(self, key: BlockKey) -> bool:
        """True iff this block caches exactly ``key``'s content (hash, parent and token ids)."""
        mine = self.key
        if mine is None:
            return False
        return mine.hash == key.hash and mine.parent == key.parent and mine.tokens == key.tokens

    def refresh(self, now_ms: int, ttl_ms: int) -> bool:
        """Marks a use at ``now_ms``; the expiry only moves later. Returns True iff the expiry moved."""
        self.last_used_ms = now_ms
        if now_ms + ttl_ms <= self.expires_at_ms:
            return False
        self.expires_at_ms = now_ms + ttl_ms
        return True

    def clear(self) -> None:
        """Forgets the cached content (the pool keeps the counts)."""
        self.key = None
        self.expires_at_ms = self.last_used_ms = 0
        self.computing = False
