"""``SdpaKernels``: the engine's fast path off the GPU, over torch's ``scaled_dot_product_attention``.

Each call reads the paged cache once. Prefill copies a sequence's blocks whole (one ``index_select``)
and attends them causally (new tokens after a cached prefix, and windowed layers, under an additive
mask built once per step for all layers, see ``prefill_mask``); decode gathers the tokens each query
sees (its last ``window`` in a windowed layer) in one ``index_select`` per pool over head-dim rows,
ordered head-major (``[B, kv_heads, T, D]``), so that SDPA's fused kernel (a blockwise online softmax on
CPU) reads dense memory and never materialises score matrices. GQA is served by grouping query heads
(decode) or by SDPA's grouped heads (prefill), never by copying K/V per head.
The pools must be contiguous (the engine allocates them so).

Stale or NaN values in cache slots a sequence does not own never reach the output: prefill reads exactly
``context_len`` tokens, and decode zeroes the padded rows of its buffer before attending. Soft-capped
scores (Gemma 2) have no SDPA form: a decode computes them from the same gathered rows in fp32
(``_capped``), a prefill goes to the reference path. Quantised pools (int8 / fp8,
see ``quant``) are written by the reference's ``write_kv``; attention dequantises the gathered blocks
(or rows) into q's dtype with their scales before SDPA. Accumulates in fp32 (SDPA's
fused CPU kernel does for fp16 and bf16) and returns q's dtype, as the protocol asks.
"""

from __future__ import annotations

import torch
from torch.nn.functional import scaled_dot_product_attention as sdpa

from kvgate.kernels.decode_plan import PlanMemo, StoredSlots
from kvgate.kernels.geometry import cache_geometry, check_block_tables, check_query, check_scales
from kvgate.kernels.prefill_mask import PrefillMasks
from kvgate.kernels.quant import dequantise
from kvgate.kernels.reference import ReferenceKernels, Scales, capped


class SdpaKernels(ReferenceKernels):
    """``AttentionKernels`` over SDPA; any device, any float dtype (see the module docstring). Block
    copies and soft-capped attention are the reference's."""

    name = "sdpa"

    def __init__(self) -> None:
        self._plans = PlanMemo()  # a decode step's gather rows and masks, shared by its layers
        self._stored = StoredSlots()  # whether a step's slot mapping stores every token, checked once
        self._masks = PrefillMasks()  # a prefill step's masks (cached prefixes, windows), built once

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
        if k_scale is not None or v_scale is not None:  # quantised: the reference's write
            super().write_kv(k, v, k_cache, v_cache, slot_mapping, k_scale=k_scale, v_scale=v_scale)
            return
        geometry = cache_geometry(k_cache, v_cache)
        _check_contiguous(k_cache, v_cache)
        rows = (-1, geometry.num_kv_heads, geometry.head_dim)
        if not self._stored.all_stored(slot_mapping):  # slot -1: skip the token
            keep = slot_mapping >= 0
            k, v, slot_mapping = k[keep], v[keep], slot_mapping[keep]
        k_cache.view(rows).index_copy_(0, slot_mapping, k.to(k_cache.dtype))
        v_cache.view(rows).index_copy_(0, slot_mapping, v.to(v_cache.dtype))

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
        if softcap is not None:
            return super().prefill_attention(
                q, k_cache, v_cache, block_tables, cu_seqlens_q, context_lens, scale,
                window=window, softcap=softcap, k_scale=k_scale, v_scale=v_scale,
            )  # fmt: skip
        check_query(q, cache_geometry(k_cache, v_cache), k_cache)
        check_block_tables(block_tables, context_lens)
        scales = (k_scale, v_scale) if check_scales(k_cache, v_cache, k_scale, v_scale) else None
        bounds, lens = cu_seqlens_q.tolist(), context_lens.tolist()

        def attend(b: int, rows: torch.Tensor) -> torch.Tensor:  # sequence b's new tokens' queries
            k, v = _context(k_cache, v_cache, block_tables[b], lens[b], scales, q.dtype)
            return _causal(rows, k, v, scale, self._mask((cu_seqlens_q, context_lens), rows, lens[b], window))

        if len(lens) == 1 and bounds == [0, q.shape[0]] and q.shape[0] > 0:  # the step's one sequence
            return attend(0, q).contiguous()  # SDPA's output is [T, H, D] in memory: no copy
        out = torch.empty_like(q)
        for b in range(len(lens)):
            start, end = bounds[b], bounds[b + 1]
            if end > start:
                out[start:end] = attend(b, q[start:end])
        return out

    def _mask(
        self, step: tuple[torch.Tensor, torch.Tensor], q: torch.Tensor, context_len: int, window: int | None
    ) -> torch.Tensor | None:
        """The additive mask of queries ``q`` at the last positions of ``context_len`` (None: a whole
        prompt without a window, SDPA's causal square)."""
        if q.shape[0] == context_len and window is None:
            return None
        return self._masks.mask(step, q.shape[0], context_len, window, q.dtype, q.device)

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
        _check_contiguous(k_cache, v_cache)
        group = check_query(q, geometry, k_cache)
        batch = check_block_tables(block_tables, context_lens)
        scales = (k_scale, v_scale) if check_scales(k_cache, v_cache, k_scale, v_scale) else None
        if batch == 0:
            return torch.empty_like(q)
        kv_heads, head_dim = geometry.num_kv_heads, geometry.head_dim
        plan = self._plans.plan(block_tables, context_lens, window, geometry.block_size, kv_heads)
        shape = (batch, kv_heads, plan.span, head_dim)
        k = torch.index_select(k_cache.view(-1, head_dim), 0, plan.rows).view(shape)  # dense, head-major
        v = torch.index_select(v_cache.view(-1, head_dim), 0, plan.rows).view(shape)
        if scales is not None:
            k, v = _dequantise_rows(k, v, scales, plan.rows, geometry.block_size, q.dtype)
        if plan.padded_rows is not None:
            k.view(-1, head_dim).index_fill_(0, plan.padded_rows, 0)
            v.view(-1, head_dim).index_fill_(0, plan.padded_rows, 0)
        grouped = q.view(batch, kv_heads, group, head_dim)  # [B, kvH, G, D]
        if softcap is not None:
            return _capped(grouped, k, v, plan.mask, scale, softcap).reshape(q.shape)
        return sdpa(grouped, k, v, attn_mask=plan.mask, scale=scale).reshape(q.shape)


def _capped(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None, scale: float, softcap: float
) -> torch.Tensor:
    """``softmax(cap(q k^T * scale)) v`` in fp32 for grouped q ``[B, kvH, G, D]`` over dense k, v
    ``[B, kvH, T, D]`` (``mask [B, 1, 1, T]``: the visible positions; None: all): soft-capped scores
    have no SDPA form, and a decode step's ``[B, kvH, G, T]`` scores are small. The reference's
    ``padded_decode`` math, as batched matmuls over the head-major rows (its einsums over them ran
    Gemma 2's decode ~5% slower). Returns q's dtype."""
    scores = capped(torch.matmul(q.float(), k.float().transpose(-1, -2)).mul_(scale), softcap)
    if mask is not None:
        scores.masked_fill_(~mask, float("-inf"))
    return torch.matmul(torch.softmax(scores, dim=-1), v.float()).to(q.dtype)


def _check_contiguous(k_cache: torch.Tensor, v_cache: torch.Tensor) -> None:
    if not (k_cache.is_contiguous() and v_cache.is_contiguous()):
        raise ValueError("the sdpa kernels need contiguous KV pools (viewed as rows of head_dim values)")


def _dequantise_rows(
    k: torch.Tensor,
    v: torch.Tensor,
    scales: tuple[torch.Tensor, torch.Tensor],
    rows: torch.Tensor,
    block_size: int,
    dtype: torch.dtype,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Gathered quantised k, v ``[B, kvH, T, D]`` (pool rows ``rows``, see ``decode_plan``) in ``dtype``:
    row ``r`` is block ``r // (block_size * kvH)``, head ``r % kvH``, so its scale is entry
    ``block * kvH + head`` of the flat ``[num_blocks * kvH]`` scales."""
    kv_heads = k.shape[1]
    index = rows // (block_size * kv_heads) * kv_heads + rows % kv_heads
    shape = (*k.shape[:3], 1)
    k_scale, v_scale = (scale.view(-1).index_select(0, index).view(shape) for scale in scales)
    return dequantise(k, k_scale, dtype), dequantise(v, v_scale, dtype)


def _context(
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    block_table: torch.Tensor,
    context_len: int,
    scales: Scales,
    dtype: torch.dtype,
) -> tuple[torch.Tensor, torch.Tensor]:
    """One sequence's first ``context_len`` tokens as dense k, v ``[context_len, kv_heads, D]``
    (quantised pools: dequantised into ``dtype``)."""
    block_size = k_cache.shape[1]
    blocks = block_table[: -(-context_len // block_size)].long()  # int64: index_select's fast path
    k = torch.index_select(k_cache, 0, blocks)  # [blocks, block_size, kv_heads, D]
    v = torch.index_select(v_cache, 0, blocks)
    if scales is not None:
        k = dequantise(k, scales[0].index_select(0, blocks)[:, None, :, None], dtype)
        v = dequantise(v, scales[1].index_select(0, blocks)[:, None, :, None], dtype)
    return k.flatten(0, 1)[:context_len], v.flatten(0, 1)[:context_len]


def _causal(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float, mask: torch.Tensor | None
) -> torch.Tensor:
    """q ``[Q, H, D]`` at the last ``Q`` positions of k, v ``[L, kvH, D]`` -> ``[Q, H, D]``: SDPA's causal
    square when ``mask`` is None (``Q == L``, no window), else under the additive ``mask [Q, L]``
    (``prefill_mask``)."""
    qh, kh, vh = q.transpose(0, 1)[None], k.transpose(0, 1)[None], v.transpose(0, 1)[None]
    gqa = {"enable_gqa": True} if q.shape[1] != k.shape[1] else {}
    if mask is None:
        out = sdpa(qh, kh, vh, is_causal=True, scale=scale, **gqa)
    else:
        out = sdpa(qh, kh, vh, attn_mask=mask, scale=scale, **gqa)
    return out[0].transpose(0, 1)
