# ruff: noqa: N803 -- Triton convention: constexpr kernel parameters are UPPER_CASE
"""Device helpers shared by the decode and prefill kernels: paged KV tile loads and one online-softmax step.

Scores live in the log2 domain (``qk_scale = scale * log2(e)``, ``exp2``); so does a soft-cap
(``softcap2 = softcap * log2(e)``: ``c * tanh(s / c)`` scales with the scores). Running maxima start at
``NEG_BIG`` (finite) rather than -inf, so a row that has seen no key yet (padding rows, empty splits) keeps
``p = 0`` and ``alpha = 1`` instead of producing NaN.
"""

from __future__ import annotations

import triton
import triton.language as tl

LOG2E = 1.4426950408889634
NEG_BIG: tl.constexpr = tl.constexpr(-1.0e30)


@triton.jit
def slot_rows(table_row_ptr, pos, valid, BLOCK_SIZE: tl.constexpr):
    """(block id, offset in block) of context positions ``pos`` [BLOCK_N] through one block-table row.

    Invalid positions map to (0, 0) without reading the table, so padding entries are never touched.
    """
    block_ids = tl.load(table_row_ptr + pos // BLOCK_SIZE, mask=valid, other=0).to(tl.int64)
    return block_ids, pos % BLOCK_SIZE


@triton.jit
def load_kv_tile(
    cache_ptr, block_ids, offsets, valid, kv_head, stride_block, stride_slot, stride_head, offs_d, mask_d
):
    """Rows (block_ids, offsets) [BLOCK_N] of one kv head -> [BLOCK_N, BLOCK_D]; rows where ``valid`` is
    false and columns past head_dim read as 0 and never touch memory."""
    rows = block_ids * stride_block + offsets * stride_slot + kv_head * stride_head
    mask = valid[:, None] & mask_d[None, :]
    return tl.load(cache_ptr + rows[:, None] + offs_d[None, :], mask=mask, other=0.0)


@triton.jit
def dequantise_tile(tile, scale_ptr, block_ids, valid, kv_head, NUM_KV_HEADS: tl.constexpr):
    """An int8 / fp8 tile [BLOCK_N, BLOCK_D] in fp32: each row times the scale of its (block, kv head)
    (scales ``[num_blocks, NUM_KV_HEADS]``, contiguous; invalid rows read scale 0)."""
    scale = tl.load(scale_ptr + block_ids * NUM_KV_HEADS + kv_head, mask=valid, other=0.0)  # [BLOCK_N]
    return tile.to(tl.float32) * scale[:, None]


@triton.jit
def tanh(x):
    """tanh from exp (saturates to +-1 where exp overflows or vanishes, never NaN)."""
    return 1.0 - 2.0 / (tl.exp(2.0 * x) + 1.0)


@triton.jit
def attend_tile(
    q, k, v, allowed, m_i, l_i, acc, qk_scale, softcap2, SOFTCAP: tl.constexpr, IEEE: tl.constexpr
):
    """One online-softmax step of q [M, D] over keys k, v [N, D] where ``allowed`` [M, N] (or broadcast).

    Returns the updated (m_i [M], l_i [M], acc [M, D]); acc is unnormalised, fp32. ``IEEE`` selects exact
    fp32 dot products (fp32 caches); otherwise operands stay in the cache dtype with fp32 accumulation.
    With ``SOFTCAP`` the scores are soft-capped at ``softcap2`` (log2 domain) before masking.
    """
    s = tl.dot(q, tl.trans(k), input_precision="ieee") if IEEE else tl.dot(q, tl.trans(k))
    s = s * qk_scale
    if SOFTCAP:
        s = softcap2 * tanh(s / softcap2)
    s = tl.where(allowed, s, float("-inf"))  # [M, N]
    m_new = tl.maximum(m_i, tl.max(s, axis=1))
    p = tl.exp2(s - m_new[:, None])
    alpha = tl.exp2(m_i - m_new)
    l_i = l_i * alpha + tl.sum(p, axis=1)
    acc = acc * alpha[:, None]
    if IEEE:
        acc += tl.dot(p, v, input_precision="ieee")
    else:
        acc = tl.dot(p.to(v.dtype), v, acc)
    return m_new, l_i, acc


NO_WINDOW = 1 << 30  # a window no context reaches: "attend to everything"


def score_options(window: int | None, softcap: float | None) -> dict[str, object]:
    """The kernels' ``window``, ``softcap2`` and ``SOFTCAP`` arguments for the protocol's options."""
    return {
        "window": NO_WINDOW if window is None else window,
        "softcap2": (softcap or 1.0) * LOG2E,
        "SOFTCAP": softcap is not None,
    }
