# ruff: noqa: N803 -- Triton convention: constexpr kernel parameters are UPPER_CASE
"""KV-cache write: one program per token stores its ``[kv_heads, head_dim]`` K and V rows at its slot."""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from kvgate.kernels.triton_ops.config import pow2_at_least


@triton.jit
def _write_kv_kernel(
    k_ptr,
    v_ptr,
    k_cache_ptr,
    v_cache_ptr,
    slot_ptr,
    stride_kt,
    stride_kh,
    stride_vt,
    stride_vh,
    stride_ckb,
    stride_cks,
    stride_ckh,
    stride_cvb,
    stride_cvs,
    stride_cvh,
    NUM_KV_HEADS: tl.constexpr,
    HEAD_DIM: tl.constexpr,
    BLOCK_H: tl.constexpr,
    BLOCK_D: tl.constexpr,
    BLOCK_SIZE: tl.constexpr,
):
    token = tl.program_id(0).to(tl.int64)
    slot = tl.load(slot_ptr + token)
    if slot < 0:  # slot -1: skip the token
        return
    block = slot // BLOCK_SIZE
    offset = slot % BLOCK_SIZE
    offs_h = tl.arange(0, BLOCK_H)[:, None]
    offs_d = tl.arange(0, BLOCK_D)[None, :]
    mask = (offs_h < NUM_KV_HEADS) & (offs_d < HEAD_DIM)
    k = tl.load(k_ptr + token * stride_kt + offs_h * stride_kh + offs_d, mask=mask)
    v = tl.load(v_ptr + token * stride_vt + offs_h * stride_vh + offs_d, mask=mask)
    k_dst = k_cache_ptr + block * stride_ckb + offset * stride_cks + offs_h * stride_ckh + offs_d
    v_dst = v_cache_ptr + block * stride_cvb + offset * stride_cvs + offs_h * stride_cvh + offs_d
    tl.store(k_dst, k.to(k_cache_ptr.dtype.element_ty), mask=mask)
    tl.store(v_dst, v.to(v_cache_ptr.dtype.element_ty), mask=mask)


def write_kv(
    k: torch.Tensor,
    v: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    slot_mapping: torch.Tensor,
) -> None:
    """Launch the write (inputs validated; k, v last axis contiguous); mutates the caches in place."""
    num_tokens, num_kv_heads, head_dim = k.shape
    if num_tokens == 0:
        return
    _write_kv_kernel[(num_tokens,)](
        k,
        v,
        k_cache,
        v_cache,
        slot_mapping,
        k.stride(0),
        k.stride(1),
        v.stride(0),
        v.stride(1),
        *k_cache.stride()[:3],
        *v_cache.stride()[:3],
        NUM_KV_HEADS=num_kv_heads,
        HEAD_DIM=head_dim,
        BLOCK_H=pow2_at_least(num_kv_heads, 1),
        BLOCK_D=pow2_at_least(head_dim, 1),
        BLOCK_SIZE=k_cache.shape[1],
    )
