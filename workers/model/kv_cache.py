"""Per-layer paged KV pools in the layout of ``kvgate.kernels.geometry``."""

from __future__ import annotations

from typing import NamedTuple

import torch

from kvgate.workers.model.config import ModelConfig


class KVCache(NamedTuple):
    """One layer's pools: k, v ``[num_blocks, block_size, num_kv_heads, head_dim]``."""

    k: torch.Tensor
    v: torch.Tensor


def allocate_kv_caches(
    config: ModelConfig, num_blocks: int, block_size: int, *, device: torch.device | str, dtype: torch.dtype
) -> list[KVCache]:
    """One zero-filled ``KVCache`` per layer, ``num_blocks`` blocks of ``block_size`` tokens each.
    Block ``b`` of every layer holds the same tokens: a block id addresses all layers at once."""
    shape = (num_blocks, block_size, config.num_kv_heads, config.head_dim)
    pools = [torch.zeros(shape, device=device, dtype=dtype) for _ in range(2 * config.num_layers)]
    return [KVCache(pools[2 * i], pools[2 * i + 1]) for i in range(config.num_layers)]


def kv_cache_bytes_per_block(config: ModelConfig, block_size: int, dtype: torch.dtype) -> int:
    """Bytes one block takes over all layers, K and V: size a pool from a memory budget with it."""
    per_layer = 2 * block_size * config.num_kv_heads * config.head_dim
    return per_layer * config.num_layers * torch.finfo(dtype).bits // 8
