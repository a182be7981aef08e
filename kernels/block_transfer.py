"""Block copy in plain torch: within one device by indexing, across devices through one staging tensor.

Across devices the K and V blocks are gathered on the source device into one contiguous staging tensor
``[2, n, block_size, kv_heads, head_dim]``, moved in ONE transfer, and scattered on the destination device.
When the CPU side is pinned the staging tensor on the CPU is pinned too and the transfer is non-blocking:

- CPU -> CUDA (swap-in): gather into pinned memory, async copy, scatter on the GPU; stream order makes the
  scatter wait for the copy, and the host does not wait at all.
- CUDA -> CPU (offload): gather on the GPU, async copy into pinned memory, wait for that copy only, then
  scatter on the CPU (the host must see the bytes before it can scatter them). On an H200 host the CPU
  scatter, not PCIe, bounds an offload (threads did not help there).
- CUDA -> another CUDA device: a peer copy of the staging tensor.

Quantised pools (int8 / fp8) move their scales ``[num_blocks, kv_heads]`` with the blocks
(:func:`copy_scales`, after the blocks: a few bytes per block, one small copy per pool).
"""

from __future__ import annotations

import torch

from kvgate.kernels.geometry import cache_geometry, check_block_ids, check_pools, check_scales
from kvgate.kernels.quant import raw

Scales = tuple[torch.Tensor, torch.Tensor]


def copy_blocks_torch(
    src_k: torch.Tensor,
    src_v: torch.Tensor,
    dst_k: torch.Tensor,
    dst_v: torch.Tensor,
    src_ids: torch.Tensor,
    dst_ids: torch.Tensor,
    *,
    src_scales: Scales | None = None,
    dst_scales: Scales | None = None,
) -> None:
    """``dst[dst_ids[i]] = src[src_ids[i]]`` for K and V (and their scales, for quantised pools), on any
    pair of devices (see module doc)."""
    check_transfer(src_k, src_v, dst_k, dst_v, src_ids, dst_ids, src_scales, dst_scales)
    src_k, src_v, dst_k, dst_v = raw(src_k), raw(src_v), raw(dst_k), raw(dst_v)  # fp8 moves as bytes
    if src_k.device == dst_k.device:
        copy_within_device(src_k, src_v, dst_k, dst_v, src_ids, dst_ids)
    else:
        copy_across_devices(src_k, src_v, dst_k, dst_v, src_ids, dst_ids)
    if src_scales is not None and dst_scales is not None:
        copy_scales(src_scales, dst_scales, src_ids, dst_ids)


def check_transfer(
    src_k: torch.Tensor,
    src_v: torch.Tensor,
    dst_k: torch.Tensor,
    dst_v: torch.Tensor,
    src_ids: torch.Tensor,
    dst_ids: torch.Tensor,
    src_scales: Scales | None = None,
    dst_scales: Scales | None = None,
) -> int:
    """Validate a block copy; returns the number of blocks. Quantised pools need both pools' scales."""
    check_pools(cache_geometry(src_k, src_v), cache_geometry(dst_k, dst_v), src_k, dst_k)
    check_scales(src_k, src_v, *(src_scales or (None, None)))
    check_scales(dst_k, dst_v, *(dst_scales or (None, None)))
    return check_block_ids(src_ids, dst_ids)


def copy_scales(src: Scales, dst: Scales, src_ids: torch.Tensor, dst_ids: torch.Tensor) -> None:
    """``dst[i][dst_ids] = src[i][src_ids]`` for the K and V scales, across devices if need be (a CPU
    destination holds the values when this returns)."""
    for src_scale, dst_scale in zip(src, dst, strict=True):
        moved = src_scale.index_select(0, _ids_on(src_ids, src_scale.device)).to(dst_scale.device)
        dst_scale.index_copy_(0, _ids_on(dst_ids, dst_scale.device), moved)


def copy_within_device(
    src_k: torch.Tensor,
    src_v: torch.Tensor,
    dst_k: torch.Tensor,
    dst_v: torch.Tensor,
    src_ids: torch.Tensor,
    dst_ids: torch.Tensor,
) -> None:
    """Gather-then-scatter with torch indexing; src and dst share a device."""
    src_ids, dst_ids = _ids_on(src_ids, src_k.device), _ids_on(dst_ids, dst_k.device)
    dst_k.index_copy_(0, dst_ids, src_k.index_select(0, src_ids))
    dst_v.index_copy_(0, dst_ids, src_v.index_select(0, src_ids))


def copy_across_devices(
    src_k: torch.Tensor,
    src_v: torch.Tensor,
    dst_k: torch.Tensor,
    dst_v: torch.Tensor,
    src_ids: torch.Tensor,
    dst_ids: torch.Tensor,
) -> None:
    """Gather on the source device, one transfer, scatter on the destination device."""
    staged = _gather(src_k, src_v, _ids_on(src_ids, src_k.device), pinned=_cpu_side_pinned(src_k, dst_k))
    moved = _transfer(staged, dst_k)  # [2, n, block_size, kv_heads, head_dim] on dst's device
    dst_ids = _ids_on(dst_ids, dst_k.device)
    dst_k.index_copy_(0, dst_ids, moved[0])
    dst_v.index_copy_(0, dst_ids, moved[1])


def _gather(cache_k: torch.Tensor, cache_v: torch.Tensor, ids: torch.Tensor, pinned: bool) -> torch.Tensor:
    """Blocks ``ids`` of K and V stacked into one fresh contiguous ``[2, n, *block]`` tensor."""
    pin = pinned and cache_k.device.type == "cpu"
    staged = torch.empty(
        (2, ids.shape[0], *cache_k.shape[1:]), dtype=cache_k.dtype, device=cache_k.device, pin_memory=pin
    )
    torch.index_select(cache_k, 0, ids, out=staged[0])
    torch.index_select(cache_v, 0, ids, out=staged[1])
    return staged


def _transfer(staged: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """Move ``staged`` to ``like``'s device in one copy; a CPU result is complete when this returns."""
    if like.device.type != "cpu":
        return staged.to(like.device, non_blocking=staged.is_pinned())
    pinned = like.is_pinned()
    host = torch.empty(staged.shape, dtype=staged.dtype, pin_memory=pinned)
    host.copy_(staged, non_blocking=pinned)
    if pinned:  # the async device-to-host copy must land before the CPU scatter reads it
        torch.cuda.current_stream(staged.device).synchronize()
    return host


def _cpu_side_pinned(src: torch.Tensor, dst: torch.Tensor) -> bool:
    cpu_side = src if src.device.type == "cpu" else dst
    return cpu_side.device.type == "cpu" and cpu_side.is_pinned()


def _ids_on(ids: torch.Tensor, device: torch.device) -> torch.Tensor:
    return ids.to(device=device, dtype=torch.int64)
