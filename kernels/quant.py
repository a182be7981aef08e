"""Quantised KV pools (int8, fp8 e4m3): one float32 scale per block and KV head, grown as a block fills.

Storage (``geometry``): a quantised layer keeps its K (and V) pool ``[num_blocks, block_size, kv_heads,
head_dim]`` of ``int8`` or ``float8_e4m3fn`` next to a scale tensor ``[num_blocks, kv_heads]`` of float32.
The element ``e`` stored in block ``b`` for KV head ``h`` stands for ``e * scale[b, h]``.

**Invariant** (kept by :func:`write_quantised`): the scale of every (block, head) covers every value stored
in it, ``|value| <= scale * QMAX`` (127 for int8, 448 for fp8), so no stored value is ever clipped. A
scale of 0 means "empty": a fresh pool is all zeros.

How a write keeps it, one pool (K or V) at a time:

1. A token written at offset 0 of a block starts that block afresh: its scales are reset to 0 first.
   Tokens of a block are written in position order (the engine appends; a cached prefix is whole
   blocks), so what the block held before belongs to no sequence that reads it any more.
2. Each touched (block, head) needs ``max |new value| / QMAX``. Where that exceeds the current scale,
   the block's stored entries are requantised: dequantised with the old scale, quantised with the new.
3. The new tokens are quantised with their block's (possibly grown) scale.

Error: quantising ``x`` with scale ``s`` errs by at most ``s / 2`` for int8 and ``|x| * 2^-4 + s * 2^-10``
for fp8 (3 mantissa bits, subnormals below ``2^-6 s``). A value requantised ``r`` times after it was
written errs by at most ``r + 1`` such steps at its final scale (each growth can only enlarge the step);
a block grows at most once per write, so ``r < block_size``, and in practice a handful of times
(the running maximum of a block's values). ``tests/kernels/test_quantised_kv.py`` checks the bound.
"""

from __future__ import annotations

import torch

QMAX: dict[torch.dtype, float] = {torch.int8: 127.0, torch.float8_e4m3fn: 448.0}
"""The largest magnitude each quantised storage type holds (the scale maps a block's max there)."""
SCALE_DTYPE = torch.float32


def is_quantised(cache: torch.Tensor) -> bool:
    """True when ``cache`` stores a quantised type (then it needs scales)."""
    return cache.dtype in QMAX


def raw(pool: torch.Tensor) -> torch.Tensor:
    """``pool`` viewed as its bytes (uint8) when it is fp8, else itself: CPU torch casts fp8 but lacks
    some indexing ops for it (``index_copy_``), which moving bytes does not need."""
    return pool.view(torch.uint8) if pool.dtype == torch.float8_e4m3fn else pool


def quantise(x: torch.Tensor, scale: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """``x / scale`` rounded into ``dtype`` (``scale`` broadcasts over ``x``; a scale of 0 stores 0)."""
    return _store(x.float() / torch.where(scale > 0, scale, 1.0), dtype)


def dequantise(q: torch.Tensor, scale: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """``q * scale`` in ``dtype`` (``scale`` broadcasts over ``q``), computed in float32."""
    return (q.float() * scale).to(dtype)


def write_quantised(x: torch.Tensor, cache: torch.Tensor, scale: torch.Tensor, slots: torch.Tensor) -> None:
    """Store ``x [T, kv_heads, head_dim]`` at ``slots [T]`` (int64, all >= 0, distinct) of the quantised
    ``cache`` with its ``scale [num_blocks, kv_heads]``, keeping the module's invariant (reset at offset 0,
    requantise a block whose scale grows). Mutates ``cache`` and ``scale``."""
    if slots.numel() == 0:
        return
    block_size = cache.shape[1]
    blocks, offsets = slots // block_size, slots % block_size
    scale.index_fill_(0, blocks[offsets == 0], 0.0)  # 1. a block written from its start is fresh
    touched, inverse = torch.unique(blocks, return_inverse=True)  # [U], [T]
    amax = x.float().abs().amax(dim=-1)  # [T, kv_heads]
    needed = torch.zeros(touched.shape[0], amax.shape[1], dtype=SCALE_DTYPE, device=x.device)
    needed.scatter_reduce_(0, inverse[:, None].expand_as(amax), amax / QMAX[cache.dtype], "amax")  # 2.
    old = scale.index_select(0, touched)  # [U, kv_heads]
    new = torch.maximum(old, needed)
    _requantise(cache, touched, old, new)
    scale.index_copy_(0, touched, new)
    raw(cache)[blocks, offsets] = raw(quantise(x, new[inverse][:, :, None], cache.dtype))  # 3. new tokens


def _requantise(cache: torch.Tensor, blocks: torch.Tensor, old: torch.Tensor, new: torch.Tensor) -> None:
    """Rescales the entries of ``blocks`` whose scale grows from ``old`` to ``new`` (``[U, kv_heads]``);
    heads that keep their scale are rescaled by exactly 1, so they do not change."""
    grows = ((new > old) & (old > 0)).any(dim=1)  # an empty (0) block has nothing worth keeping
    if not bool(grows.any()):
        return
    which = blocks[grows]
    ratio = (old[grows] / new[grows])[:, None, :, None]  # [G, 1, kv_heads, 1], <= 1
    requantised = _store(cache.index_select(0, which).float() * ratio, cache.dtype)
    raw(cache).index_copy_(0, which, raw(requantised))


def _store(scaled: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """float32 values already divided by their scale, rounded (int8) and clamped into ``dtype``."""
    if dtype == torch.int8:
        scaled = scaled.round()
    qmax = QMAX[dtype]
    return scaled.clamp(-qmax, qmax).to(dtype)
