"""The two KV tiers' tensors and sizes: the GPU tier on the model's device, sized by blocks, by bytes or
by a memory fraction, and the CPU tier in host memory (pinned when the GPU tier is on CUDA), sized by
blocks or by bytes. Bytes become blocks at the KV dtype's bytes per block, scales included
(:func:`kvgate.proto.kv_dtype.kv_block_bytes`), so a quantised dtype holds more tokens in the same bytes."""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch

from kvgate.proto.kv_dtype import kv_block_bytes
from kvgate.proto.layout import KVGeometry
from kvgate.proto.units import BlockCount
from kvgate.workers.engine.config import EngineConfig
from kvgate.workers.model import KVCache, allocate_kv_caches

GIB = 2**30


@dataclass(frozen=True, slots=True)
class KVCapacity:
    """What the tiers hold: ``kv_dtype`` (its command-line name), ``bytes_per_block`` over all layers,
    K and V and scales, and each tier's blocks of ``block_size`` tokens."""

    kv_dtype: str
    bytes_per_block: int
    block_size: int
    gpu_blocks: int
    cpu_blocks: int

    @property
    def gpu_tokens(self) -> int:
        return self.gpu_blocks * self.block_size

    @property
    def cpu_tokens(self) -> int:
        return self.cpu_blocks * self.block_size

    @property
    def tokens_per_gib(self) -> int:
        """Tokens one GiB of KV memory holds in this dtype (whole blocks)."""
        return GIB // self.bytes_per_block * self.block_size

    def describe(self) -> str:
        """One line for logs: ``KV int8: 4,096 GPU tokens (256 blocks), 0 CPU tokens; 9,216 B per block``."""
        return (
            f"KV {self.kv_dtype}: {self.gpu_tokens:,} GPU tokens ({self.gpu_blocks:,} blocks), "
            f"{self.cpu_tokens:,} CPU tokens; {self.bytes_per_block:,} B per {self.block_size}-token block, "
            f"{self.tokens_per_gib:,} tokens per GiB"
        )


def free_device_bytes(device: torch.device) -> int:
    """Memory free on ``device`` now: CUDA's free memory, or the host's available memory for ``cpu``."""
    if device.type == "cuda":
        free, _total = torch.cuda.mem_get_info(device)
        return int(free)
    return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")


def blocks_for_fraction(per_block: int, device: torch.device, fraction: float) -> int:
    """How many blocks of ``per_block`` bytes fit in ``fraction`` of ``device``'s free memory (>= 1);
    call after loading the model so that its weights are not counted as free."""
    blocks = int(free_device_bytes(device) * fraction) // per_block
    if blocks < 1:
        raise ValueError(f"{fraction:.0%} of the free memory of {device} holds no KV block ({per_block} B)")
    return blocks


def tier_sizes(config: EngineConfig, kv: KVGeometry) -> KVCapacity:
    """Both tiers' blocks for ``config`` and the model's KV geometry (its shape; the elements are the
    config's KV dtype). Raises ValueError when ``kv_memory_bytes`` holds no block."""
    per_block = kv_block_bytes(kv, config.kv_dtype, config.block_size)
    if config.num_gpu_blocks is not None:
        gpu = config.num_gpu_blocks
    elif config.kv_memory_bytes is not None:
        gpu = config.kv_memory_bytes // per_block
        if gpu < 1:
            raise ValueError(
                f"kv_memory_bytes {config.kv_memory_bytes:,} holds no KV block ({per_block:,} B)"
            )
    else:
        fraction = config.gpu_memory_fraction or 1.0
        gpu = blocks_for_fraction(per_block, config.torch_device, fraction)
    cpu = config.num_cpu_blocks
    if config.cpu_kv_memory_bytes is not None:
        cpu = config.cpu_kv_memory_bytes // per_block
    return KVCapacity(config.kv_dtype.name, per_block, config.block_size, gpu, cpu)


def allocate_cpu_tier(
    kv: KVGeometry, num_blocks: BlockCount, block_size: int, *, pinned: bool
) -> list[KVCache]:
    """One zeroed host ``KVCache`` per layer (``[num_blocks, block_size, kv_heads, head_dim]`` each,
    page-locked when ``pinned``); an empty list when ``num_blocks`` is 0."""
    if num_blocks == 0:
        return []
    return allocate_kv_caches(kv, num_blocks, block_size, device="cpu", pinned=pinned)
