"""Plain-torch paged attention: the specification of every backend and the CPU path of the engine.

Each sequence's context is gathered from its blocks into a dense ``[context_len, kv_heads, head_dim]``
tensor (dequantised to float32 for int8 / fp8 pools, see ``quant``) and attended in fp32 with an
explicit causal mask. Lengths are read on the host (``tolist``), so on
a GPU this path waits for the device once per call; it is meant to be obviously right, not fast.
"""

from __future__ import annotations

import torch

from kvgate.kernels.block_transfer import copy_blocks_torch
from kvgate.kernels.geometry import cache_geometry, check_block_tables, check_query, check_scales
from kvgate.kernels.quant import dequantise, write_quantised


class ReferenceKernels:
    """``AttentionKernels`` in plain torch; any device, any float dtype, int8 / fp8 pools with scales.
    Copies across devices are staged through one transfer (see ``block_transfer``)."""

    name = "reference"

    def write_kv(
        self,
        k: torch.Tensor,
        v: torch.Tensor,
        k_cache: torch.Tensor,
        v_cache: torch.Tensor,
        slot_mapping: torch.Tensor,
        *,
        k_scale: torch.Tensor | None = None,
        v_scale: torch.Tensor | None = None,
    ) -> None:
        block_size = cache_geometry(k_cache, v_cache).block_size
        keep = slot_mapping >= 0  # slot -1: skip the token
        slots = slot_mapping[keep]
        if check_scales(k_cache, v_cache, k_scale, v_scale):
            write_quantised(k[keep], k_cache, k_scale, slots)  # type: ignore[arg-type]
            write_quantised(v[keep], v_cache, v_scale, slots)  # type: ignore[arg-type]
            return
        blocks, offsets = slots // block_size, slots % block_size
        k_cache[blocks, offsets] = k[keep].to(k_cache.dtype)
        v_cache[blocks, offsets] = v[keep].to(v_cache.dtype)

    def prefill_attention(
        self,
        q: torch.Tensor,
        k_cache: torch.Tensor,
        v_cache: torch.Tensor,
        block_tables: torch.Tensor,
        cu_seqlens_q: torch.Tensor,
        context_lens: torch.Tensor,
        scale: float,
        *,
        window: int | None = None,
        softcap: float | None = None,
        k_scale: torch.Tensor | None = None,
        v_scale: torch.Tensor | None = None,
    ) -> torch.Tensor:
        check_query(q, cache_geometry(k_cache, v_cache), k_cache)
        check_block_tables(block_tables, context_lens)
        scales = (k_scale, v_scale) if check_scales(k_cache, v_cache, k_scale, v_scale) else None
        out = torch.empty_like(q)
        bounds, lens = cu_seqlens_q.tolist(), context_lens.tolist()
        for b, context_len in enumerate(lens):
            start, end = bounds[b], bounds[b + 1]
            if end > start:
                k, v = gather_context(k_cache, v_cache, block_tables[b], context_len, scales)
                out[start:end] = causal_attention(q[start:end], k, v, scale, window=window, softcap=softcap)
        return out

    def decode_attention(
        self,
        q: torch.Tensor,
        k_cache: torch.Tensor,
        v_cache: torch.Tensor,
        block_tables: torch.Tensor,
        context_lens: torch.Tensor,
        scale: float,
        *,
        window: int | None = None,
        softcap: float | None = None,
        k_scale: torch.Tensor | None = None,
        v_scale: torch.Tensor | None = None,
    ) -> torch.Tensor:
        geometry = cache_geometry(k_cache, v_cache)
        check_query(q, geometry, k_cache)
        check_block_tables(block_tables, context_lens)
        scales = (k_scale, v_scale) if check_scales(k_cache, v_cache, k_scale, v_scale) else None
        k, v, hidden = gather_padded(k_cache, v_cache, block_tables, context_lens, scales)
        if window is not None:  # and positions before the window: those < context_len - window
            positions = torch.arange(hidden.shape[1], device=hidden.device)
            hidden = hidden | (positions[None, :] < (context_lens.to(positions.dtype) - window)[:, None])
        return padded_decode(q, k, v, hidden, scale, softcap=softcap)

    def copy_blocks(
        self,
        src_k: torch.Tensor,
        src_v: torch.Tensor,
        dst_k: torch.Tensor,
        dst_v: torch.Tensor,
        src_ids: torch.Tensor,
        dst_ids: torch.Tensor,
        *,
        src_scales: tuple[torch.Tensor, torch.Tensor] | None = None,
        dst_scales: tuple[torch.Tensor, torch.Tensor] | None = None,
    ) -> None:
        copy_blocks_torch(
            src_k, src_v, dst_k, dst_v, src_ids, dst_ids, src_scales=src_scales, dst_scales=dst_scales
        )


Scales = tuple[torch.Tensor, torch.Tensor] | None
"""k_scale and v_scale ``[num_blocks, kv_heads]`` of quantised pools; None for float pools."""


def gather_context(
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    block_table: torch.Tensor,
    context_len: int,
    scales: Scales = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The first ``context_len`` tokens of one sequence as dense k, v ``[context_len, kv_heads, D]``
    (float32, dequantised, for quantised pools)."""
    block_size = k_cache.shape[1]
    positions = torch.arange(context_len, device=k_cache.device)
    blocks = block_table.long()[positions // block_size]
    offsets = positions % block_size
    k, v = k_cache[blocks, offsets], v_cache[blocks, offsets]
    if scales is None:
        return k, v
    k_scale, v_scale = scales
    f32 = torch.float32
    return dequantise(k, k_scale[blocks][:, :, None], f32), dequantise(v, v_scale[blocks][:, :, None], f32)


def causal_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    scale: float,
    *,
    window: int | None = None,
    softcap: float | None = None,
) -> torch.Tensor:
    """Attention of the last ``Q`` positions of a context over all of it, in fp32, GQA without copies.

    q ``[Q, heads, D]`` holds positions ``L-Q .. L-1`` of k, v ``[L, kv_heads, D]`` (``L >= Q``); the query
    at position ``i`` sees positions ``0..i`` (``i-window+1..i`` with a window; scores soft-capped by
    ``softcap``, see the protocol). Returns ``[Q, heads, D]`` in q's dtype.
    """
    num_q, num_heads, head_dim = q.shape
    context_len, num_kv_heads, _ = k.shape
    if context_len < num_q:
        raise ValueError(f"context_len {context_len} < query tokens {num_q}")
    group = num_heads // num_kv_heads
    qg = q.float().view(num_q, num_kv_heads, group, head_dim).permute(1, 2, 0, 3)  # [kvH, G, Q, D]
    kt = k.float().permute(1, 2, 0).unsqueeze(1)  # [kvH, 1, D, L]
    vg = v.float().permute(1, 0, 2).unsqueeze(1)  # [kvH, 1, L, D]
    scores = capped((qg @ kt) * scale, softcap)  # [kvH, G, Q, L]
    q_pos = torch.arange(context_len - num_q, context_len, device=q.device)
    k_pos = torch.arange(context_len, device=q.device)
    hidden = k_pos[None, :] > q_pos[:, None]  # [Q, L]
    if window is not None:
        hidden |= k_pos[None, :] <= q_pos[:, None] - window
    scores.masked_fill_(hidden, float("-inf"))
    out = torch.softmax(scores, dim=-1) @ vg  # [kvH, G, Q, D]
    return out.permute(2, 0, 1, 3).reshape(num_q, num_heads, head_dim).to(q.dtype)


def gather_padded(
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    block_tables: torch.Tensor,
    context_lens: torch.Tensor,
    scales: Scales = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Every sequence's context, right-padded to the longest: k, v ``[B, T, kv_heads, head_dim]``
    (float32, dequantised, for quantised pools) and ``padding [B, T]`` (True past a sequence's length).
    Padded positions of v are zeroed, so that whatever stale values (even NaN) sit in unowned slots
    cannot reach the output."""
    batch, block_size = block_tables.shape[0], k_cache.shape[1]
    longest = int(context_lens.max()) if batch else 0
    tables = block_tables[:, : -(-longest // block_size)].long()  # [B, blocks]
    k, v = k_cache[tables], v_cache[tables]  # [B, blocks, block_size, kv_heads, head_dim]
    if scales is not None:
        k = dequantise(k, scales[0][tables][:, :, None, :, None], torch.float32)
        v = dequantise(v, scales[1][tables][:, :, None, :, None], torch.float32)
    k = k.flatten(1, 2)[:, :longest]  # [B, T, kv_heads, head_dim]
    v = v.flatten(1, 2)[:, :longest]
    positions = torch.arange(longest, device=k.device)
    padding = positions[None, :] >= context_lens[:, None].to(positions.dtype)  # [B, T]
    return k, v.masked_fill(padding[:, :, None, None], 0), padding


def padded_decode(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    padding: torch.Tensor,
    scale: float,
    *,
    softcap: float | None = None,
) -> torch.Tensor:
    """softmax(cap(q k^T * scale)) v over each sequence's positions not marked in ``padding [B, T]``,
    GQA by grouping query heads: q ``[B, heads, d]``, k / v ``[B, T, kv_heads, d]`` -> ``[B, heads, d]``
    in q's dtype."""
    batch, heads, dim = q.shape
    kv_heads = k.shape[2]
    grouped = q.float().view(batch, kv_heads, heads // kv_heads, dim)  # [B, kvh, g, d]
    scores = capped(torch.einsum("bkgd,btkd->bkgt", grouped, k.float()) * scale, softcap)
    scores = scores.masked_fill(padding[:, None, None, :], float("-inf"))
    out = torch.einsum("bkgt,btkd->bkgd", torch.softmax(scores, dim=-1), v.float())
    return out.reshape(batch, heads, dim).to(q.dtype)


def capped(scores: torch.Tensor, softcap: float | None) -> torch.Tensor:
    """``softcap * tanh(scores / softcap)``, or ``scores`` itself without a cap."""
    return scores if softcap is None else torch.tanh(scores / softcap) * softcap
