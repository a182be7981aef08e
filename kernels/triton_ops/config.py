"""Tile sizes and launch heuristics of the Triton kernels: one frozen object, chosen once per backend."""

from __future__ import annotations

import functools
from dataclasses import dataclass

import torch
import triton


@dataclass(frozen=True, slots=True)
class TritonConfig:
    """Launch parameters. All tile sizes are powers of two >= 16 (``tl.dot`` needs 16). The defaults
    were the fastest of a sweep on an H200 (bf16, 32 query / 8 kv heads, head_dim 128).

    decode_block_n: KV tokens per decode loop step.
    decode_min_split_tokens: the least context one decode split covers (bounds split-K overhead).
    decode_max_splits: the most splits of one sequence (split-K / flash-decoding).
    decode_target_programs: decode programs to aim for; 0 means 16 per streaming multiprocessor on CUDA
        and 1 (no split) elsewhere.
    prefill_block_m: query rows per prefill program (query tokens x padded heads of one kv head).
    prefill_block_n: KV tokens per prefill loop step.
    copy_block: elements each block-copy program moves (per pool).
    *_num_warps, *_num_stages: Triton launch options of each kernel.
    """

    decode_block_n: int = 64
    decode_min_split_tokens: int = 512
    decode_max_splits: int = 32
    decode_target_programs: int = 0
    decode_num_warps: int = 4
    decode_num_stages: int = 2
    prefill_block_m: int = 128
    prefill_block_n: int = 32
    prefill_num_warps: int = 8
    prefill_num_stages: int = 2
    copy_block: int = 2048
    copy_num_warps: int = 4

    def __post_init__(self) -> None:
        for name in ("decode_block_n", "prefill_block_m", "prefill_block_n", "copy_block"):
            value = getattr(self, name)
            if value < 16 or value & (value - 1):
                raise ValueError(f"{name}={value} must be a power of two >= 16")
        if self.decode_min_split_tokens < 1 or self.decode_max_splits < 1:
            raise ValueError("decode_min_split_tokens and decode_max_splits must be >= 1")

    def decode_splits(self, batch: int, num_kv_heads: int, max_tokens: int, device: torch.device) -> int:
        """Splits per sequence so that ``batch * kv_heads * splits`` fills the device (>= 1)."""
        target = self.decode_target_programs or _default_programs(device)
        wanted = triton.cdiv(target, max(1, batch * num_kv_heads))
        useful = triton.cdiv(max(1, max_tokens), self.decode_min_split_tokens)
        return max(1, min(wanted, useful, self.decode_max_splits))


def _default_programs(device: torch.device) -> int:
    return 16 * _sm_count(device.index) if device.type == "cuda" else 1


@functools.cache
def _sm_count(index: int | None) -> int:
    return torch.cuda.get_device_properties(index if index is not None else 0).multi_processor_count


def pow2_at_least(n: int, floor: int = 16) -> int:
    """The smallest power of two >= max(n, floor)."""
    return max(floor, triton.next_power_of_2(n))
