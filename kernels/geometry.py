"""Shape contract of the paged KV cache, checked once at every kernel boundary.

Layout (fixed; the engine builds on it):

- ``k_cache``, ``v_cache``: ``[num_blocks, block_size, num_kv_heads, head_dim]``, same dtype and device,
  last dimension contiguous. A *slot* is ``block_id * block_size + offset``.
- block tables: int32 ``[batch, max_blocks_per_seq]``; entries past a sequence's length may hold any valid
  block id and are never read.
- GQA: query head ``h`` reads kv head ``h // (num_heads // num_kv_heads)``.
- Quantised pools (``int8``, ``float8_e4m3fn``) come with float32 scales ``[num_blocks, kv_heads]`` for K
  and for V (``k_scale``, ``v_scale``; see ``quant``); float pools take none. q is then any float dtype.

The checks look at shapes, dtypes and devices only: they never read tensor values, so they never make
the host wait for the device.
"""

from __future__ import annotations

from typing import NamedTuple

import torch

from kvgate.kernels.quant import SCALE_DTYPE, is_quantised
from kvgate.proto.layout import KVGeometry


class CacheGeometry(NamedTuple):
    """Sizes of one KV pool."""

    num_blocks: int
    block_size: int
    num_kv_heads: int
    head_dim: int


def pool_shape(kv: KVGeometry, num_blocks: int, block_size: int) -> tuple[int, int, int, int]:
    """The shape of one layer's K (or V) pool of the layout above, for the model's KV geometry."""
    return (num_blocks, *kv.block_shape(block_size))


def pool_dtype(kv: KVGeometry) -> torch.dtype:
    """The torch dtype of the geometry's element type (``"bfloat16"`` -> ``torch.bfloat16``)."""
    return getattr(torch, kv.dtype)


def cache_geometry(k_cache: torch.Tensor, v_cache: torch.Tensor) -> CacheGeometry:
    """The geometry shared by ``k_cache`` and ``v_cache``; raises ``ValueError`` when they disagree."""
    if k_cache.dim() != 4:
        raise ValueError(f"k_cache must be [num_blocks, block_size, kv_heads, head_dim], got {k_cache.shape}")
    if v_cache.shape != k_cache.shape:
        raise ValueError(f"v_cache shape {tuple(v_cache.shape)} != k_cache shape {tuple(k_cache.shape)}")
    if v_cache.dtype != k_cache.dtype or v_cache.device != k_cache.device:
        raise ValueError("k_cache and v_cache must share dtype and device")
    if k_cache.stride(-1) != 1 or v_cache.stride(-1) != 1:
        raise ValueError("the head_dim axis of the caches must be contiguous")
    return CacheGeometry(*k_cache.shape)


def group_size(num_heads: int, geometry: CacheGeometry) -> int:
    """Query heads per kv head; raises ``ValueError`` unless ``num_kv_heads`` divides ``num_heads``."""
    if num_heads % geometry.num_kv_heads:
        raise ValueError(f"num_kv_heads={geometry.num_kv_heads} must divide num_heads={num_heads}")
    return num_heads // geometry.num_kv_heads


def check_query(q: torch.Tensor, geometry: CacheGeometry, k_cache: torch.Tensor) -> int:
    """Validate q ``[tokens, num_heads, head_dim]`` against the cache; returns the GQA group size."""
    if q.dim() != 3 or q.shape[2] != geometry.head_dim:
        raise ValueError(f"q must be [tokens, heads, {geometry.head_dim}], got {tuple(q.shape)}")
    if q.device != k_cache.device or (q.dtype != k_cache.dtype and not is_quantised(k_cache)):
        raise ValueError(
            f"q ({q.dtype}, {q.device}) must match the cache ({k_cache.dtype}, {k_cache.device})"
        )
    return group_size(q.shape[1], geometry)


def check_scales(
    k_cache: torch.Tensor, v_cache: torch.Tensor, k_scale: torch.Tensor | None, v_scale: torch.Tensor | None
) -> bool:
    """True for a quantised pair of pools with valid scales (float32 ``[num_blocks, kv_heads]`` on the
    pools' device), False for float pools without scales; ``ValueError`` for any other combination."""
    quantised = is_quantised(k_cache)
    if (k_scale is None) != (v_scale is None) or quantised != (k_scale is not None):
        raise ValueError(
            f"{k_cache.dtype} KV pools need "
            + ("k_scale and v_scale" if quantised else "no scales (only int8 / fp8 pools are scaled)")
        )
    if k_scale is None or v_scale is None:
        return False
    expected = (k_cache.shape[0], k_cache.shape[2])
    for scale in (k_scale, v_scale):
        if scale.shape != expected or scale.dtype != SCALE_DTYPE or scale.device != k_cache.device:
            raise ValueError(
                f"KV scales must be float32 {list(expected)} on {k_cache.device}, got "
                f"{scale.dtype} {list(scale.shape)} on {scale.device}"
            )
    return True


def check_block_tables(block_tables: torch.Tensor, context_lens: torch.Tensor) -> int:
    """Validate block tables ``[batch, max_blocks]`` and context_lens ``[batch]``; returns batch."""
    if block_tables.dim() != 2 or block_tables.dtype != torch.int32:
        raise ValueError(f"block_tables must be int32 [batch, max_blocks], got {block_tables.dtype}")
    if context_lens.shape != (block_tables.shape[0],) or context_lens.dtype != torch.int32:
        raise ValueError("context_lens must be int32 [batch] matching block_tables")
    return block_tables.shape[0]


def check_block_ids(src_ids: torch.Tensor, dst_ids: torch.Tensor) -> int:
    """Validate two 1-D integer id tensors of equal length; returns that length."""
    if src_ids.dim() != 1 or src_ids.shape != dst_ids.shape:
        raise ValueError(
            f"src_ids {tuple(src_ids.shape)} and dst_ids {tuple(dst_ids.shape)} must be 1-D, of equal length"
        )
    if src_ids.is_floating_point() or dst_ids.is_floating_point():
        raise ValueError("block ids must be integer tensors")
    return src_ids.shape[0]


def check_pools(src: CacheGeometry, dst: CacheGeometry, src_k: torch.Tensor, dst_k: torch.Tensor) -> None:
    """Blocks can only be copied between pools of equal block shape and dtype."""
    if src[1:] != dst[1:] or src_k.dtype != dst_k.dtype:
        raise ValueError(f"cannot copy blocks between {src} {src_k.dtype} and {dst} {dst_k.dtype}")
