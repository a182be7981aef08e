"""Per-layer paged KV pools in the layout of ``kvgate.kernels.geometry``, for the model's KV geometry
(:class:`kvgate.proto.layout.KVGeometry`: layers, KV heads, head dim, element type)."""

from __future__ import annotations

from typing import NamedTuple

import torch

from kvgate.kernels import pool_dtype, pool_shape
from kvgate.proto.layout import KVGeometry
from kvgate.proto.units import BlockCount


class KVCache(NamedTuple):
    """One layer's pools: k, v ``[num_blocks, block_size, num_kv_heads, head_dim]``."""

    k: torch.Tensor
    v: torch.Tensor


def allocate_kv_caches(
    kv: KVGeometry,
    num_blocks: BlockCount,
    block_size: int,
    *,
    device: torch.device | str,
    pinned: bool = False,
) -> list[KVCache]:
    """One zero-filled ``KVCache`` per layer, ``num_blocks`` blocks of ``block_size`` tokens each
    (page-locked host memory when ``pinned``). Block ``b`` of every layer holds the same tokens: a
    block id addresses all layers at once."""
    shape, dtype = pool_shape(kv, num_blocks, block_size), pool_dtype(kv)
    pools = [
        torch.zeros(shape, device=device, dtype=dtype, pin_memory=pinned) for _ in range(2 * kv.num_layers)
    ]
    return [KVCache(pools[2 * i], pools[2 * i + 1]) for i in range(kv.num_layers)]


def kv_cache_bytes_per_block(kv: KVGeometry, block_size: int) -> int:
    """Bytes one block takes over all layers, K and V: size a pool from a memory budget with it."""
    return kv.bytes_per_token * block_size
