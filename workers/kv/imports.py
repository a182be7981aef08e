"""Importing a prompt's prefix KV computed by another worker: the blocks are cached as if computed here.

Run between two engine steps (nothing is scheduled, no copy plan is pending). The importer trusts no
hash of the exporter: every key comes from its own copy of the prompt, so a block is cached only under
the hash, parent and token ids this worker computes, and a later admission finds it as an ordinary GPU
hit. Blocks are never leaked: a failed write leaves them empty, and a block whose hash turns out to be
cached already (a collision) stays unkeyed and becomes empty when released.
"""

from __future__ import annotations

from collections.abc import Callable

from kvgate.proto.layout import reusable_tokens
from kvgate.workers.kv.block import BlockKey, KVBlock
from kvgate.workers.kv.config import KVCacheConfig
from kvgate.workers.kv.copy_plan import CopyPlan
from kvgate.workers.kv.prompt import Prompt
from kvgate.workers.kv.results import ImportedPrefix
from kvgate.workers.kv.tiers import TieredCache
from kvgate.workers.kv.types import BlockHash, BlockId

WriteBlocks = Callable[[int, tuple[BlockId, ...], CopyPlan], None]
"""``write(first, block_ids, plan)``: runs ``plan`` (offloads of the GPU blocks the allocation evicted:
their KV leaves before it is overwritten), then writes the KV of prompt blocks ``first, first + 1, ...``
into GPU blocks ``block_ids`` (all layers, scales included). An exception discards the blocks."""


def import_prefix(
    cache: TieredCache, config: KVCacheConfig, prompt: Prompt, hit: list[KVBlock], num_blocks: int,
    write: WriteBlocks,
) -> ImportedPrefix:  # fmt: skip
    """Caches prompt blocks ``len(hit) .. num_blocks - 1`` (``hit``: the verified cached prefix; only
    reusable blocks, as many as the GPU has free) from imported KV, then releases them (ref 0, cached,
    the default TTL). Mutates both tiers; the hit is held meanwhile, so no allocation evicts it."""
    for block in hit:
        cache.hold(block)
    try:
        size = config.block_size
        limit = min(num_blocks, reusable_tokens(len(prompt), size) // size)
        count = max(0, min(limit - len(hit), cache.gpu.num_free))
        blocks = [cache.allocate() for _ in range(count)]
        try:
            if blocks:
                write(len(hit), tuple(b.block_id for b in blocks), cache.take_plan())
        except BaseException:
            for block in blocks:
                cache.release(block, 0)  # unkeyed: empty again
            raise
        stored = _store(cache, config, prompt, len(hit), blocks)
    finally:
        for block in reversed(hit):
            cache.unhold(block)
    cache.chunks.flush()
    return ImportedPrefix(len(hit), stored)


def _store(
    cache: TieredCache, config: KVCacheConfig, prompt: Prompt, first: int, blocks: list[KVBlock]
) -> int:
    # Caches the blocks in chain order until one cannot be (its successors' parent would be missing).
    ttl_ms = round(config.ttl_s * 1000)
    stored = 0
    for offset, block in enumerate(blocks):
        key, members = _key(config, prompt, first + offset)
        if stored == offset and cache.store(block, key, ttl_ms, members):
            stored += 1
    for block in reversed(blocks):  # tail first, as a freed sequence: the chain's tail goes first
        cache.release(block, ttl_ms)
    return stored


def _key(config: KVCacheConfig, prompt: Prompt, index: int) -> tuple[BlockKey, tuple[BlockHash, ...]]:
    # The block's key; with the chunk hash and the chunk's member blocks when it ends a chunk.
    key = prompt.block_key(index, config.block_size)
    end = (index + 1) * config.block_size
    if end % config.chunk_size:
        return key, ()
    chunk = prompt.chunk_hashes[end // config.chunk_size - 1]
    members = prompt.block_hashes[index + 1 - config.blocks_per_chunk : index + 1]
    return BlockKey(key.hash, key.parent, key.tokens, chunk), tuple(members)
