"""The two KV tiers' tensors: the GPU tier on the model's device, sized by blocks or by a memory
fraction, and the CPU tier in host memory (pinned when the GPU tier is on CUDA)."""

from __future__ import annotations

import os

import torch

from kvgate.workers.model import KVCache, ModelConfig, allocate_kv_caches, kv_cache_bytes_per_block


def free_device_bytes(device: torch.device) -> int:
    """Memory free on ``device`` now: CUDA's free memory, or the host's available memory for ``cpu``."""
    if device.type == "cuda":
        free, _total = torch.cuda.mem_get_info(device)
        return int(free)
    return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")


def blocks_for_fraction(
    config: ModelConfig, block_size: int, dtype: torch.dtype, device: torch.device, fraction: float
) -> int:
    """How many blocks fit in ``fraction`` of ``device``'s free memory (>= 1); call after loading the
    model so that its weights are not counted as free."""
    per_block = kv_cache_bytes_per_block(config, block_size, dtype)
    blocks = int(free_device_bytes(device) * fraction) // per_block
    if blocks < 1:
        raise ValueError(f"{fraction:.0%} of the free memory of {device} holds no KV block ({per_block} B)")
    return blocks


def allocate_cpu_tier(
    config: ModelConfig, num_blocks: int, block_size: int, dtype: torch.dtype, *, pinned: bool
) -> list[KVCache]:
    """One zeroed host ``KVCache`` per layer (``[num_blocks, block_size, kv_heads, head_dim]`` each,
    page-locked when ``pinned``); an empty list when ``num_blocks`` is 0."""
    if num_blocks == 0:
        return []
    if not pinned:
        return allocate_kv_caches(config, num_blocks, block_size, device="cpu", dtype=dtype)
    shape = (num_blocks, block_size, config.num_kv_heads, config.head_dim)
    pools = [torch.zeros(shape, dtype=dtype, pin_memory=True) for _ in range(2 * config.num_layers)]
    return [KVCache(pools[2 * i], pools[2 * i + 1]) for i in range(config.num_layers)]
