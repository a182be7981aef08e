"""Settings of one worker's KV block manager: pool sizes, layout and TTLs. Validated, immutable."""

from __future__ import annotations

from dataclasses import dataclass

from kvgate.proto.layout import DEFAULT_BLOCK_SIZE, DEFAULT_CHUNK_SIZE, DEFAULT_TTL_S, CacheLayout
from kvgate.proto.units import BlockCount


@dataclass(frozen=True, slots=True)
class KVCacheConfig:
    """``num_gpu_blocks`` / ``num_cpu_blocks``: capacity of each tier in blocks (0 CPU blocks disables
    offload: pressure then drops blocks). ``block_size`` tokens per block; ``chunk_size`` tokens per
    published chunk (a multiple of ``block_size``). ``ttl_s``: default TTL of a cached block, counted
    from its last use; ``cpu_ttl_s``: the least time a block offloaded to the CPU tier stays there.
    """

    num_gpu_blocks: BlockCount
    num_cpu_blocks: BlockCount = 0
    block_size: int = DEFAULT_BLOCK_SIZE
    chunk_size: int = DEFAULT_CHUNK_SIZE
    ttl_s: float = DEFAULT_TTL_S
    cpu_ttl_s: float = DEFAULT_TTL_S

    def __post_init__(self) -> None:
        if self.num_gpu_blocks <= 0 or self.num_cpu_blocks < 0:
            raise ValueError("need num_gpu_blocks > 0 and num_cpu_blocks >= 0")
        if self.block_size <= 0 or self.chunk_size <= 0 or self.chunk_size % self.block_size:
            sizes = f"chunk_size {self.chunk_size}, block_size {self.block_size}"
            raise ValueError(f"chunk_size must be a positive multiple of block_size, got {sizes}")
        if self.ttl_s < 0 or self.cpu_ttl_s < 0:
            raise ValueError("TTLs must be >= 0")

    @classmethod
    def for_deployment(
        cls, cache: CacheLayout, num_gpu_blocks: BlockCount, num_cpu_blocks: BlockCount = 0
    ) -> KVCacheConfig:
        """A config with the deployment's block and chunk sizes (so published chunk hashes match)."""
        return cls(num_gpu_blocks, num_cpu_blocks, cache.block_size, cache.chunk_size)

    @property
    def blocks_per_chunk(self) -> BlockCount:
        return BlockCount(self.chunk_size // self.block_size)

    def blocks_for(self, num_tokens: int) -> BlockCount:
        """Blocks needed to hold ``num_tokens`` tokens (0 for 0)."""
        return BlockCount(-(-num_tokens // self.block_size))
