# ruff: noqa: N803 -- Triton convention: constexpr kernel parameters are UPPER_CASE
"""Paged decode attention (one query token per sequence), split-K / flash-decoding style.

Grid ``(batch, kv_heads, splits)``: a program owns the ``G`` query heads that share one kv head (padded to
16 rows for ``tl.dot``), so each K/V tile is loaded once for the whole group, and streams one contiguous
range of the context in ``BLOCK_N``-token tiles with an online softmax. With one split it writes the
output directly; otherwise it writes an unnormalised partial (acc, max, sum) and a second kernel merges
the splits of each (sequence, head).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from kvgate.kernels.triton_ops.config import TritonConfig, pow2_at_least
from kvgate.kernels.triton_ops.tiles import (
    LOG2E,
    NEG_BIG,
    attend_tile,
    dequantise_tile,
    load_kv_tile,
    score_options,
    slot_rows,
)


@triton.jit
def _decode_kernel(
    q_ptr,
    k_cache_ptr,
    v_cache_ptr,
    k_scale_ptr,
    v_scale_ptr,
    block_tables_ptr,
    context_lens_ptr,
    out_ptr,
    part_acc_ptr,
    part_ml_ptr,
    qk_scale,
    softcap2,
    window,
    split_len,
    num_splits,
    stride_qb,
    stride_qh,
    stride_ob,
    stride_oh,
    stride_kb,
    stride_ks,
    stride_kh,
    stride_vb,
    stride_vs,
    stride_vh,
    stride_bt,
    GROUP: tl.constexpr,
    HEAD_DIM: tl.constexpr,
    BLOCK_G: tl.constexpr,
    BLOCK_D: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_SIZE: tl.constexpr,
    SPLIT: tl.constexpr,
    SOFTCAP: tl.constexpr,
    IEEE: tl.constexpr,
    SCALED: tl.constexpr,
    NUM_KV_HEADS: tl.constexpr,
):
    seq = tl.program_id(0)
    kv_head = tl.program_id(1)
    split = tl.program_id(2)
    context_len = tl.load(context_lens_ptr + seq)
    end = tl.minimum(context_len, split * split_len + split_len)
    start = tl.maximum(split * split_len, context_len - window)  # a split before the window stays empty

    offs_g = tl.arange(0, BLOCK_G)
    offs_d = tl.arange(0, BLOCK_D)
    mask_d = offs_d < HEAD_DIM
    mask_q = (offs_g < GROUP)[:, None] & mask_d[None, :]
    heads = kv_head * GROUP + offs_g  # [BLOCK_G] query heads of this kv head
    seq64 = seq.to(tl.int64)
    q_ptrs = q_ptr + seq64 * stride_qb + heads[:, None] * stride_qh + offs_d[None, :]
    q = tl.load(q_ptrs, mask=mask_q, other=0.0)  # [BLOCK_G, BLOCK_D]

    table_row = block_tables_ptr + seq64 * stride_bt
    m_i = tl.full([BLOCK_G], NEG_BIG, dtype=tl.float32)
    l_i = tl.zeros([BLOCK_G], dtype=tl.float32)
    acc = tl.zeros([BLOCK_G, BLOCK_D], dtype=tl.float32)
    for tile_start in range(start, end, BLOCK_N):
        pos = tile_start + tl.arange(0, BLOCK_N)
        valid = pos < end
        block_ids, offsets = slot_rows(table_row, pos, valid, BLOCK_SIZE)
        k = load_kv_tile(
            k_cache_ptr, block_ids, offsets, valid, kv_head, stride_kb, stride_ks, stride_kh, offs_d, mask_d
        )
        v = load_kv_tile(
            v_cache_ptr, block_ids, offsets, valid, kv_head, stride_vb, stride_vs, stride_vh, offs_d, mask_d
        )
        if SCALED:  # int8 / fp8 pools: dequantised here, into q's dtype for the dot products
            k = dequantise_tile(k, k_scale_ptr, block_ids, valid, kv_head, NUM_KV_HEADS).to(q.dtype)
            v = dequantise_tile(v, v_scale_ptr, block_ids, valid, kv_head, NUM_KV_HEADS).to(q.dtype)
        m_i, l_i, acc = attend_tile(q, k, v, valid[None, :], m_i, l_i, acc, qk_scale, softcap2, SOFTCAP, IEEE)

    if SPLIT:
        # partials [batch, heads, splits, (D | 2)]: row index (seq * heads + head) * splits + split
        num_heads = tl.num_programs(1) * GROUP
        row = (seq64 * num_heads + heads) * num_splits + split  # [BLOCK_G]
        tl.store(part_acc_ptr + row[:, None] * HEAD_DIM + offs_d[None, :], acc, mask=mask_q)
        mask_g = offs_g < GROUP
        tl.store(part_ml_ptr + row * 2, m_i, mask=mask_g)
        tl.store(part_ml_ptr + row * 2 + 1, l_i, mask=mask_g)
    else:
        out = acc / tl.where(l_i > 0.0, l_i, 1.0)[:, None]
        o_ptrs = out_ptr + seq64 * stride_ob + heads[:, None] * stride_oh + offs_d[None, :]
        tl.store(o_ptrs, out.to(out_ptr.dtype.element_ty), mask=mask_q)


@triton.jit
def _merge_kernel(
    part_acc_ptr,
    part_ml_ptr,
    out_ptr,
    num_splits,
    stride_ob,
    stride_oh,
    HEAD_DIM: tl.constexpr,
    BLOCK_D: tl.constexpr,
    BLOCK_S: tl.constexpr,
):
    """Grid (batch, heads): out = sum_s w_s acc_s / sum_s w_s l_s with w_s = 2^(m_s - max m)."""
    seq = tl.program_id(0).to(tl.int64)
    head = tl.program_id(1)
    offs_s = tl.arange(0, BLOCK_S)
    offs_d = tl.arange(0, BLOCK_D)
    mask_s = offs_s < num_splits
    mask_d = offs_d < HEAD_DIM
    rows = (seq * tl.num_programs(1) + head) * num_splits + offs_s  # [BLOCK_S]
    m = tl.load(part_ml_ptr + rows * 2, mask=mask_s, other=NEG_BIG)
    l_s = tl.load(part_ml_ptr + rows * 2 + 1, mask=mask_s, other=0.0)
    acc = tl.load(
        part_acc_ptr + rows[:, None] * HEAD_DIM + offs_d[None, :],
        mask=mask_s[:, None] & mask_d[None, :],
        other=0.0,
    )  # [BLOCK_S, BLOCK_D]
    w = tl.exp2(m - tl.max(m, axis=0))
    denom = tl.sum(w * l_s, axis=0)
    out = tl.sum(w[:, None] * acc, axis=0) / tl.where(denom > 0.0, denom, 1.0)
    o_ptrs = out_ptr + seq * stride_ob + head * stride_oh + offs_d
    tl.store(o_ptrs, out.to(out_ptr.dtype.element_ty), mask=mask_d)


def decode_attention(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    block_tables: torch.Tensor,
    context_lens: torch.Tensor,
    scale: float,
    config: TritonConfig,
    window: int | None = None,
    softcap: float | None = None,
    scales: tuple[torch.Tensor, torch.Tensor] | None = None,
) -> torch.Tensor:
    """Launch decode attention (inputs already validated); q ``[batch, heads, D]`` -> out of the same shape;
    ``window`` / ``softcap``: the protocol's score options; ``scales``: (k, v) scales of int8 / fp8 pools
    (contiguous ``[num_blocks, kv_heads]``), dequantised as the tiles are loaded.

    Splits are sized from ``block_tables.shape[1]`` (never from device values, so the host never waits):
    pass block tables trimmed to the batch's longest sequence.
    """
    batch, num_heads, head_dim = q.shape
    _, block_size, num_kv_heads, _ = k_cache.shape
    out = torch.empty_like(q)
    if batch == 0:
        return out
    max_tokens = block_tables.shape[1] * block_size
    splits = config.decode_splits(batch, num_kv_heads, max_tokens, q.device)
    split_len = triton.cdiv(triton.cdiv(max_tokens, splits), config.decode_block_n) * config.decode_block_n
    splits = triton.cdiv(max_tokens, split_len)
    part_acc = part_ml = out  # unused placeholders when there is one split
    if splits > 1:
        part_acc = torch.empty((batch, num_heads, splits, head_dim), dtype=torch.float32, device=q.device)
        part_ml = torch.empty((batch, num_heads, splits, 2), dtype=torch.float32, device=q.device)
    group = num_heads // num_kv_heads
    options = score_options(window, softcap)
    _decode_kernel[(batch, num_kv_heads, splits)](
        q,
        k_cache,
        v_cache,
        *(scales or (k_cache, v_cache)),  # unused without SCALED
        block_tables,
        context_lens,
        out,
        part_acc,
        part_ml,
        scale * LOG2E,
        options["softcap2"],
        options["window"],
        split_len,
        splits,
        q.stride(0),
        q.stride(1),
        out.stride(0),
        out.stride(1),
        *k_cache.stride()[:3],
        *v_cache.stride()[:3],
        block_tables.stride(0),
        GROUP=group,
        HEAD_DIM=head_dim,
        BLOCK_G=pow2_at_least(group),
        BLOCK_D=pow2_at_least(head_dim),
        BLOCK_N=config.decode_block_n,
        BLOCK_SIZE=block_size,
        SPLIT=splits > 1,
        SOFTCAP=options["SOFTCAP"],
        IEEE=q.dtype == torch.float32,
        SCALED=scales is not None,
        NUM_KV_HEADS=num_kv_heads,
        num_warps=config.decode_num_warps,
        num_stages=config.decode_num_stages,
    )
    if splits > 1:
        _merge_kernel[(batch, num_heads)](
            part_acc,
            part_ml,
            out,
            splits,
            out.stride(0),
            out.stride(1),
            HEAD_DIM=head_dim,
            BLOCK_D=pow2_at_least(head_dim),
            BLOCK_S=pow2_at_least(splits, 2),
        )
    return out
