# ruff: noqa: N803 -- Triton convention: constexpr kernel parameters are UPPER_CASE
"""Paged causal prefill attention over a varlen batch whose contexts may start with a cached prefix.

Grid ``(q_tiles, kv_heads)``. A program owns ``BLOCK_Q`` consecutive query tokens of one sequence times
the ``G`` query heads of one kv head, flattened into ``BLOCK_M = BLOCK_Q * BLOCK_G`` rows (row ``r`` is
token ``r // BLOCK_G``, head ``r % BLOCK_G``), so every K/V tile is loaded once per group. Query tile ``j``
of sequence ``b`` is program ``cu_seqlens_q[b] // BLOCK_Q + b + j``: the grid size
``total_q // BLOCK_Q + batch`` bounds every sequence's tiles without reading lengths on the host, and a
program finds its sequence by binary search over ``cu_seqlens_q`` (surplus programs exit at once).
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
def _find_sequence(cu_seqlens_ptr, tile, num_seqs, BLOCK_Q: tl.constexpr):
    """The largest b in [0, num_seqs) with cu_seqlens[b] // BLOCK_Q + b <= tile (strictly increasing in b)."""
    lo: tl.int32 = 0
    hi = num_seqs
    while lo < hi:
        mid = (lo + hi) // 2
        first_tile = tl.load(cu_seqlens_ptr + mid) // BLOCK_Q + mid
        if first_tile <= tile:
            lo = mid + 1
        else:
            hi = mid
    return lo - 1


@triton.jit
def _prefill_kernel(
    q_ptr,
    k_cache_ptr,
    v_cache_ptr,
    k_scale_ptr,
    v_scale_ptr,
    block_tables_ptr,
    cu_seqlens_ptr,
    context_lens_ptr,
    out_ptr,
    qk_scale,
    softcap2,
    window,
    num_seqs,
    stride_qt,
    stride_qh,
    stride_ot,
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
    BLOCK_Q: tl.constexpr,
    BLOCK_D: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_SIZE: tl.constexpr,
    SOFTCAP: tl.constexpr,
    IEEE: tl.constexpr,
    SCALED: tl.constexpr,
    NUM_KV_HEADS: tl.constexpr,
):
    tile = tl.program_id(0)
    kv_head = tl.program_id(1)
    seq = _find_sequence(cu_seqlens_ptr, tile, num_seqs, BLOCK_Q)
    q_start = tl.load(cu_seqlens_ptr + seq)
    q_len = tl.load(cu_seqlens_ptr + seq + 1) - q_start
    q_tile = tile - (q_start // BLOCK_Q + seq)
    if q_tile * BLOCK_Q >= q_len:
        return
    context_len = tl.load(context_lens_ptr + seq)
    prefix_len = context_len - q_len

    rows = tl.arange(0, BLOCK_Q * BLOCK_G)
    tok = q_tile * BLOCK_Q + rows // BLOCK_G  # [BLOCK_M] token index within the sequence's queries
    group_idx = rows % BLOCK_G
    heads = kv_head * GROUP + group_idx
    offs_d = tl.arange(0, BLOCK_D)
    mask_d = offs_d < HEAD_DIM
    mask_q = ((tok < q_len) & (group_idx < GROUP))[:, None] & mask_d[None, :]
    q_rows = (q_start + tok).to(tl.int64)
    q = tl.load(
        q_ptr + q_rows[:, None] * stride_qt + heads[:, None] * stride_qh + offs_d[None, :],
        mask=mask_q,
        other=0.0,
    )
    q_pos = prefix_len + tok  # absolute position of each row's token

    table_row = block_tables_ptr + seq.to(tl.int64) * stride_bt
    kv_end = tl.minimum(context_len, prefix_len + (q_tile + 1) * BLOCK_Q)  # causal: nothing past the tile
    kv_start = tl.maximum(prefix_len + q_tile * BLOCK_Q - window + 1, 0)  # window: nothing before the first
    m_i = tl.full([BLOCK_Q * BLOCK_G], NEG_BIG, dtype=tl.float32)
    l_i = tl.zeros([BLOCK_Q * BLOCK_G], dtype=tl.float32)
    acc = tl.zeros([BLOCK_Q * BLOCK_G, BLOCK_D], dtype=tl.float32)
    for tile_start in range(kv_start, kv_end, BLOCK_N):
        pos = tile_start + tl.arange(0, BLOCK_N)
        valid = pos < kv_end
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
        allowed = valid[None, :] & (pos[None, :] <= q_pos[:, None]) & (pos[None, :] > q_pos[:, None] - window)
        m_i, l_i, acc = attend_tile(q, k, v, allowed, m_i, l_i, acc, qk_scale, softcap2, SOFTCAP, IEEE)

    out = acc / tl.where(l_i > 0.0, l_i, 1.0)[:, None]
    o_ptrs = out_ptr + q_rows[:, None] * stride_ot + heads[:, None] * stride_oh + offs_d[None, :]
    tl.store(o_ptrs, out.to(out_ptr.dtype.element_ty), mask=mask_q)


def prefill_attention(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    block_tables: torch.Tensor,
    cu_seqlens_q: torch.Tensor,
    context_lens: torch.Tensor,
    scale: float,
    config: TritonConfig,
    window: int | None = None,
    softcap: float | None = None,
    scales: tuple[torch.Tensor, torch.Tensor] | None = None,
) -> torch.Tensor:
    """Launch prefill attention (inputs already validated); q ``[total_q, heads, D]`` -> out, same shape.
    ``window`` / ``softcap``: the protocol's score options; ``scales``: (k, v) scales of int8 / fp8 pools
    (contiguous ``[num_blocks, kv_heads]``), dequantised as the tiles are loaded."""
    total_q, num_heads, head_dim = q.shape
    _, block_size, num_kv_heads, _ = k_cache.shape
    batch = context_lens.shape[0]
    out = torch.empty_like(q)
    if total_q == 0 or batch == 0:
        return out
    group = num_heads // num_kv_heads
    block_g = pow2_at_least(group, 1)
    block_q = max(1, config.prefill_block_m // block_g)  # BLOCK_Q * BLOCK_G >= 16 rows for tl.dot
    options = score_options(window, softcap)
    _prefill_kernel[(total_q // block_q + batch, num_kv_heads)](
        q,
        k_cache,
        v_cache,
        *(scales or (k_cache, v_cache)),  # unused without SCALED
        block_tables,
        cu_seqlens_q,
        context_lens,
        out,
        scale * LOG2E,
        options["softcap2"],
        options["window"],
        batch,
        q.stride(0),
        q.stride(1),
        out.stride(0),
        out.stride(1),
        *k_cache.stride()[:3],
        *v_cache.stride()[:3],
        block_tables.stride(0),
        GROUP=group,
        HEAD_DIM=head_dim,
        BLOCK_G=block_g,
        BLOCK_Q=block_q,
        BLOCK_D=pow2_at_least(head_dim),
        BLOCK_N=config.prefill_block_n,
        BLOCK_SIZE=block_size,
        SOFTCAP=options["SOFTCAP"],
        IEEE=q.dtype == torch.float32,
        SCALED=scales is not None,
        NUM_KV_HEADS=num_kv_heads,
        num_warps=config.prefill_num_warps,
        num_stages=config.prefill_num_stages,
    )
    return out
