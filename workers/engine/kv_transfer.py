"""A prompt's cached prefix KV, moved between two workers of one model: read from either tier as bytes
on the exporter, written into GPU blocks on the importer (which caches them as ordinary blocks, see
:mod:`kvgate.workers.kv.imports`). Engine thread only, between steps.

The bytes of one block (the contract's layout, ``KVBlockData.data`` in ``worker.proto``): layer by
layer, layer 0 first; per layer K, then V, each ``[block_size, num_kv_heads, head_dim]`` elements of the
pool's dtype in row-major order; then, for a quantised pool only, the K scales, then the V scales, each
``[num_kv_heads]`` float32. Host byte order (little-endian on every platform the engine runs on).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

from kvgate.proto.ids import Tier
from kvgate.workers.kv import BlockHash, BlockId, CopyPlan, ImportedPrefix, KVCacheManager, Prompt
from kvgate.workers.model import KVCache

BATCH_BLOCKS = 16  # blocks per engine call: bounds the bytes held at once and the time between steps

RunCopies = Callable[[CopyPlan], None]


@dataclass(frozen=True, slots=True)
class KVBlockBytes:
    """One exported block: its ``index`` in the prompt, its ``block_hash`` (:func:`wire_hash` of the
    exporter's block hash) and its KV ``data`` in the layout of the module docstring."""

    index: int
    block_hash: int
    data: bytes


def wire_hash(block_hash: BlockHash) -> int:
    """The 64-bit form of a block hash on the wire: its first 8 bytes, little-endian (pure)."""
    return int.from_bytes(block_hash[:8], "little")


def block_nbytes(pools: Sequence[KVCache]) -> int:
    """Bytes of one block in the layout above, for ``pools`` (one KVCache per layer)."""
    return sum(_nbytes(part[0]) for layer in pools for part in _parts(layer))


def export_blocks(
    kv: KVCacheManager, gpu: Sequence[KVCache], cpu: Sequence[KVCache], prompt: Prompt, first: int, count: int
) -> list[KVBlockBytes]:
    """The KV of prompt blocks ``first .. first + count - 1`` that are cached here now (either tier),
    in order; it stops where the cached prefix stops (empty when it stops before ``first``)."""
    hit = kv.lookup(prompt).blocks[first : first + count]
    out = []
    for offset, (tier, block_id) in enumerate(hit):
        index = first + offset
        data = _read(gpu if tier is Tier.GPU else cpu, block_id)
        out.append(KVBlockBytes(index, wire_hash(prompt.block_hashes[index]), data))
    return out


def import_blocks(
    kv: KVCacheManager,
    gpu: Sequence[KVCache],
    copy: RunCopies,
    prompt: Prompt,
    blocks: Sequence[KVBlockBytes],
) -> ImportedPrefix:
    """Caches ``blocks`` (consecutive indices, the KV of the prompt's blocks from another worker) after
    the prefix cached here (see :meth:`KVCacheManager.import_prefix`); ``copy`` runs a copy plan. Raises
    ValueError, importing nothing, when a block's index, size or hash is not what this worker expects
    of ``prompt``. A prefix cached here that ends before ``blocks[0]`` imports nothing."""
    _check(prompt, blocks, block_nbytes(gpu))
    cached = len(kv.lookup(prompt).blocks)
    start = blocks[0].index if blocks else cached
    if cached < start or not blocks:
        return ImportedPrefix(cached, 0)

    def write(first: int, block_ids: tuple[BlockId, ...], plan: CopyPlan) -> None:
        copy(plan)
        _write(gpu, block_ids, [b.data for b in blocks[first - start : first - start + len(block_ids)]])

    return kv.import_prefix(prompt, blocks[-1].index + 1, write)


def _check(prompt: Prompt, blocks: Sequence[KVBlockBytes], nbytes: int) -> None:
    for offset, block in enumerate(blocks):
        index = blocks[0].index + offset
        if block.index != index:
            raise ValueError(f"block {offset} has index {block.index}, expected {index}")
        if index >= len(prompt.block_hashes):
            raise ValueError(f"block index {index} is past the prompt's full blocks")
        if len(block.data) != nbytes:
            raise ValueError(f"block {index} holds {len(block.data)} bytes, a block here holds {nbytes}")
        if block.block_hash != wire_hash(prompt.block_hashes[index]):
            raise ValueError(f"block {index}'s hash differs from this worker's hash of it")


def _parts(layer: KVCache) -> list[torch.Tensor]:
    scales = layer.scales
    return [layer.k, layer.v] if scales is None else [layer.k, layer.v, *scales]


def _nbytes(t: torch.Tensor) -> int:
    return t.numel() * t.element_size()


def _read(pools: Sequence[KVCache], block_id: BlockId) -> bytes:
    parts = [p[block_id].contiguous().view(torch.uint8).reshape(-1) for layer in pools for p in _parts(layer)]
    return torch.cat(parts).cpu().numpy().tobytes()


def _write(pools: Sequence[KVCache], block_ids: Sequence[BlockId], datas: Sequence[bytes]) -> None:
    # One host tensor per block; then one copy per layer part, of all blocks at once.
    raws = [torch.frombuffer(bytearray(data), dtype=torch.uint8) for data in datas]
    ids = torch.tensor(list(block_ids), dtype=torch.int64)
    offset = 0
    for layer in pools:
        for part in _parts(layer):
            size, shape = _nbytes(part[0]), part.shape[1:]
            src = torch.stack([raw[offset : offset + size].view(part.dtype).view(shape) for raw in raws])
            part[ids.to(part.device)] = src.to(part.device)
            offset += size
