"""The two KV tiers' tensors: the GPU tier on the model's device, sized by blocks or by a memory
fraction, and the CPU tier in host memory (pinned when the GPU tier is on CUDA)."""

from __future__ import annotations

import os

import torch

from kvgate.proto.layout import KVGeometry
from kvgate.proto.units import BlockCount
from kvgate.workers.model import KVCache, allocate_kv_caches, kv_cache_bytes_per_block


def free_device_bytes(device: torch.device) -> int:
    """Memory free on ``device`` now: CUDA's free memory, or the host's available memory for ``cpu``."""
    if device.type == "cuda":
        free, _total = torch.cuda.mem_get_info(device)
        return int(free)
    return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")


def blocks_for_fraction(kv: KVGeometry, block_size: int, device: torch.device, fraction: float) -> int:
    """How many blocks fit in ``fraction`` of ``device``'s free memory (>= 1); call after loading the
    model so that its weights are not counted as free."""
    per_block = kv_cache_bytes_per_block(kv, block_size)
    blocks = int(free_device_bytes(device) * fraction) // per_block
    if blocks < 1:
        raise ValueError(f"{fraction:.0%} of the free memory of {device} holds no KV block ({per_block} B)")
    return blocks


def allocate_cpu_tier(
    kv: KVGeometry, num_blocks: BlockCount, block_size: int, *, pinned: bool
) -> list[KVCache]:
    """One zeroed host ``KVCache`` per layer (``[num_blocks, block_size, kv_heads, head_dim]`` each,
    page-locked when ``pinned``); an empty list when ``num_blocks`` is 0."""
    if num_blocks == 0:
        return []
    return allocate_kv_caches(kv, num_blocks, block_size, device="cpu", pinned=pinned)
