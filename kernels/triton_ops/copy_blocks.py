# ruff: noqa: N803 -- Triton convention: constexpr kernel parameters are UPPER_CASE
"""Block copy within one device: program ``(i, chunk)`` copies ``copy_block`` elements of block
``src_ids[i]`` to block ``dst_ids[i]``, for K and V. Needs contiguous pools (a block is one flat run of
``block_size * kv_heads * head_dim`` elements)."""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from kvgate.kernels.triton_ops.config import TritonConfig


@triton.jit
def _copy_blocks_kernel(
    src_k_ptr,
    src_v_ptr,
    dst_k_ptr,
    dst_v_ptr,
    src_ids_ptr,
    dst_ids_ptr,
    BLOCK_NUMEL: tl.constexpr,
    CHUNK: tl.constexpr,
):
    pair = tl.program_id(0)
    offs = tl.program_id(1) * CHUNK + tl.arange(0, CHUNK)
    mask = offs < BLOCK_NUMEL
    src = tl.load(src_ids_ptr + pair).to(tl.int64) * BLOCK_NUMEL + offs
    dst = tl.load(dst_ids_ptr + pair).to(tl.int64) * BLOCK_NUMEL + offs
    tl.store(dst_k_ptr + dst, tl.load(src_k_ptr + src, mask=mask), mask=mask)
    tl.store(dst_v_ptr + dst, tl.load(src_v_ptr + src, mask=mask), mask=mask)


def copy_blocks(
    src_k: torch.Tensor,
    src_v: torch.Tensor,
    dst_k: torch.Tensor,
    dst_v: torch.Tensor,
    src_ids: torch.Tensor,
    dst_ids: torch.Tensor,
    config: TritonConfig,
) -> None:
    """Launch the copy (validated; all on one device, pools contiguous); mutates dst_k, dst_v."""
    num_pairs = src_ids.shape[0]
    if num_pairs == 0:
        return
    block_numel = src_k[0].numel()
    chunk = min(config.copy_block, triton.next_power_of_2(block_numel))
    ids = _ids_on(src_ids, dst_ids, dst_k.device)
    _copy_blocks_kernel[(num_pairs, triton.cdiv(block_numel, chunk))](
        src_k,
        src_v,
        dst_k,
        dst_v,
        ids[0],
        ids[1],
        BLOCK_NUMEL=block_numel,
        CHUNK=chunk,
        num_warps=config.copy_num_warps,
    )


def _ids_on(src_ids: torch.Tensor, dst_ids: torch.Tensor, device: torch.device) -> torch.Tensor:
    """int64 ``[2, n]`` (src ids, dst ids) on ``device``, in one host-to-device copy when both come from
    the host (each small copy from pageable memory makes the host wait)."""
    if src_ids.device == dst_ids.device:
        return torch.stack((src_ids, dst_ids)).to(device=device, dtype=torch.int64)
    return torch.stack((src_ids.to(device, torch.int64), dst_ids.to(device, torch.int64)))
