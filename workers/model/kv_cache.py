"""Per-layer paged KV pools in the layout of ``kvgate.kernels.geometry``, for the model's KV geometry
(:class:`kvgate.proto.layout.KVGeometry`: layers, KV heads, head dim, element type). A quantised element
type (``int8``, ``float8_e4m3fn``) adds a float32 scale per block and KV head for K and for V
(``kvgate.kernels.quant``); a fresh pool's scales are 0 ("empty")."""

from __future__ import annotations

from typing import NamedTuple

import torch

from kvgate.kernels import pool_dtype, pool_shape
from kvgate.kernels.quant import SCALE_DTYPE, is_quantised
from kvgate.proto.kv_dtype import kv_block_bytes, kv_dtype
from kvgate.proto.layout import KVGeometry
from kvgate.proto.units import BlockCount


class KVCache(NamedTuple):
    """One layer's pools: k, v ``[num_blocks, block_size, num_kv_heads, head_dim]``; for quantised pools
    their scales ``k_scale``, ``v_scale`` ``[num_blocks, num_kv_heads]`` (None for float pools)."""

    k: torch.Tensor
    v: torch.Tensor
    k_scale: torch.Tensor | None = None
    v_scale: torch.Tensor | None = None

    @property
    def scales(self) -> tuple[torch.Tensor, torch.Tensor] | None:
        """``(k_scale, v_scale)`` of a quantised layer, None for a float one."""
        if self.k_scale is None or self.v_scale is None:
            return None
        return self.k_scale, self.v_scale


def allocate_kv_caches(
    kv: KVGeometry,
    num_blocks: BlockCount,
    block_size: int,
    *,
    device: torch.device | str,
    pinned: bool = False,
) -> list[KVCache]:
    """One zero-filled ``KVCache`` per layer, ``num_blocks`` blocks of ``block_size`` tokens each
    (page-locked host memory when ``pinned``), with zero scales for a quantised ``kv.dtype``. Block ``b``
    of every layer holds the same tokens: a block id addresses all layers at once."""
    shape, dtype = pool_shape(kv, num_blocks, block_size), pool_dtype(kv)
    caches = []
    for _ in range(kv.num_layers):
        k, v = (torch.zeros(shape, device=device, dtype=dtype, pin_memory=pinned) for _ in "kv")
        if not is_quantised(k):
            caches.append(KVCache(k, v))
            continue
        scale_shape = (num_blocks, kv.num_kv_heads)
        scales = [torch.zeros(scale_shape, device=device, dtype=SCALE_DTYPE, pin_memory=pinned) for _ in "kv"]
        caches.append(KVCache(k, v, *scales))
    return caches


def kv_cache_bytes_per_block(kv: KVGeometry, block_size: int) -> int:
    """Bytes one block takes over all layers, K and V, scales included: size a pool from a memory budget
    with it (the rule of :func:`kvgate.proto.kv_dtype.kv_block_bytes`)."""
    return kv_block_bytes(kv, kv_dtype(kv.dtype), block_size)
