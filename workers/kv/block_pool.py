"""One tier's pool of KV blocks: ref counts, the hash map of cached blocks, the free queues.

Every block is in exactly one state:

- **empty**: ref 0, no key; on the empty queue, handed out first;
- **free cached**: ref 0, keyed, in the hash map and on the :class:`FreeBlockQueue` (evictable);
- **in use**: ref > 0, keyed (in the hash map) or not (a partial block, or a duplicate of a block
  already cached under the same hash);
- **victim** (transient): popped off the free queue by :meth:`BlockPool.pop_victim`, still keyed, until
  the caller hands it to :meth:`reuse` or :meth:`discard` in the same call.

So ``num_empty + num_cached_free + num_used == num_blocks`` always holds.
"""

from __future__ import annotations

from collections import deque

from kvgate.proto.ids import Tier
from kvgate.workers.kv.block import BlockKey, KVBlock
from kvgate.workers.kv.free_queue import FreeBlockQueue
from kvgate.workers.kv.types import BlockHash, BlockId


class BlockPool:
    """The blocks of one tier (``tier``), ``num_blocks`` of them, ids ``0 .. num_blocks-1``."""

    def __init__(self, tier: Tier, num_blocks: int) -> None:
        self.tier = tier
        self.blocks: tuple[KVBlock, ...] = tuple(KVBlock(BlockId(i), tier) for i in range(num_blocks))
        self._empty: deque[KVBlock] = deque(self.blocks)
        self._free = FreeBlockQueue()
        self._by_hash: dict[BlockHash, KVBlock] = {}

    @property
    def num_blocks(self) -> int:
        return len(self.blocks)

    @property
    def num_free(self) -> int:
        """Blocks an allocation may take: empty ones plus unreferenced cached ones (evicted on demand)."""
        return len(self._empty) + len(self._free)

    @property
    def num_empty(self) -> int:
        """Blocks caching nothing and used by no one."""
        return len(self._empty)

    @property
    def num_cached(self) -> int:
        """Keyed blocks, in use or not."""
        return len(self._by_hash)

    def empty_ids(self) -> list[BlockId]:
        """Empty block ids, next handed out first (pure)."""
        return [b.block_id for b in self._empty]

    def free_cached_ids(self) -> list[BlockId]:
        """Unreferenced cached block ids, next evicted first unless one has expired (pure)."""
        return self._free.ids()

    def cached_items(self) -> list[tuple[BlockHash, KVBlock]]:
        """The hash map's entries (pure)."""
        return list(self._by_hash.items())

    def get(self, block_hash: BlockHash) -> KVBlock | None:
        """The block cached under ``block_hash``, unverified (pure)."""
        return self._by_hash.get(block_hash)

    def find(self, key: BlockKey) -> KVBlock | None:
        """The block caching exactly ``key`` (hash, parent and token ids verified), else None (pure)."""
        block = self._by_hash.get(key.hash)
        return block if block is not None and block.matches(key) else None

    def allocate(self) -> KVBlock | None:
        """An empty block with ref 1, or None when no block is empty (never evicts)."""
        if not self._empty:
            return None
        block = self._empty.popleft()
        block.ref_cnt = 1
        return block

    def pop_victim(self, now_ms: int, *, expired_only: bool = False) -> KVBlock | None:
        """Takes an unreferenced cached block off the free queue: one whose expiry is <= ``now_ms``
        first, else (unless ``expired_only``) the least recently used. None when there is none.

        The victim stays keyed (so the caller can move its content); pass it to :meth:`reuse` or
        :meth:`discard` before any other call on this pool.
        """
        victim = self._free.pop_expired(now_ms)
        if victim is None and not expired_only:
            victim = self._free.pop_lru()
        return victim

    def reuse(self, block: KVBlock) -> None:
        """Uncaches a victim or free cached ``block`` and hands it out with ref 1."""
        self._check_unreferenced(block)
        self._uncache(block)
        block.ref_cnt = 1

    def discard(self, block: KVBlock) -> None:
        """Uncaches a victim or free cached ``block`` and makes it empty (queued last)."""
        self._check_unreferenced(block)
        self._uncache(block)
        self._empty.append(block)

    def take(self, block: KVBlock) -> None:
        """One more user for ``block`` (a cache hit); a free cached block leaves the free queue."""
        if block.ref_cnt == 0:
            self._free.remove(block)
        block.ref_cnt += 1

    def release(self, block: KVBlock) -> None:
        """One user fewer. At ref 0 a keyed block is queued as free cached (most recently used), an
        unkeyed one becomes empty. Raises on a double free (ref already 0)."""
        if block.ref_cnt <= 0:
            raise RuntimeError(f"double free of {self.tier.name} block {block.block_id}")
        block.ref_cnt -= 1
        if block.ref_cnt:
            return
        if block.key is None:
            self._empty.append(block)
        else:
            self._free.push(block)

    def register(self, block: KVBlock, key: BlockKey) -> bool:
        """Caches in-use, unkeyed ``block`` under ``key``. Returns False (changing nothing) when another
        block is already cached under ``key.hash``: the first one stays, this one stays uncached."""
        if block.ref_cnt <= 0 or block.key is not None:
            raise RuntimeError(f"register needs an in-use, unkeyed block, got {block}")
        if key.hash in self._by_hash:
            return False
        block.key = key
        self._by_hash[key.hash] = block
        return True

    def unregister(self, block: KVBlock) -> None:
        """Uncaches in-use ``block`` (it keeps its users and becomes empty when they free it)."""
        if block.ref_cnt <= 0:
            raise RuntimeError("unregister needs an in-use block; use discard for a free one")
        self._uncache(block)

    def _uncache(self, block: KVBlock) -> None:
        self._free.remove(block)
        if block.key is not None:
            del self._by_hash[block.key.hash]
        block.clear()

    def _check_unreferenced(self, block: KVBlock) -> None:
        if block.ref_cnt:
            raise RuntimeError(f"{self.tier.name} block {block.block_id} is in use (ref {block.ref_cnt})")
