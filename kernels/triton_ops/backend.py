"""``TritonKernels``: the GPU backend of ``AttentionKernels`` (see ``kvgate.kernels.protocol``).

Devices: attention and ``write_kv`` run on CUDA tensors, or on CPU tensors when the kernels were defined
under ``TRITON_INTERPRET=1`` (tests). ``copy_blocks`` runs the Triton kernel when both pools sit on the
same such device and are contiguous; pools on different devices (GPU <-> CPU tier, GPU <-> GPU) go through
one staged transfer (``kvgate.kernels.block_transfer``); any other same-device case uses torch indexing.
Validation reads shapes only, never device values, so no call makes the host wait for the GPU (except a
copy to a CPU pool, which must complete before it returns).

Quantised KV pools (int8 / fp8 with scales, see ``kvgate.kernels.quant``): the attention kernels load the
quantised tiles and their (block, head) scales and dequantise them into q's dtype; ``write_kv`` keeps the
scales with the torch implementation of ``quant`` on the pools' device (growing a block's scale
requantises the whole block, which one token's program cannot do alone); ``copy_blocks`` moves fp8 blocks
as bytes and the scales with them.
"""

from __future__ import annotations

import torch
from triton.runtime.interpreter import InterpretedFunction

from kvgate.kernels import block_transfer
from kvgate.kernels.geometry import cache_geometry, check_block_tables, check_query, check_scales
from kvgate.kernels.quant import raw, write_quantised
from kvgate.kernels.triton_ops import copy_blocks, decode, prefill, write_kv
from kvgate.kernels.triton_ops.config import TritonConfig


def interpreted() -> bool:
    """True when the kernels were defined under ``TRITON_INTERPRET=1`` (they then run on CPU tensors)."""
    return isinstance(write_kv._write_kv_kernel, InterpretedFunction)


class TritonKernels:
    """Triton implementation of ``AttentionKernels``; ``config`` fixes tile sizes and split heuristics."""

    name = "triton"

    def __init__(self, config: TritonConfig | None = None) -> None:
        self.config = config or TritonConfig()

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
        geometry = cache_geometry(k_cache, v_cache)
        _check_runnable(k_cache)
        if k.shape != v.shape or k.shape[1:] != (geometry.num_kv_heads, geometry.head_dim):
            raise ValueError(f"k, v must be [tokens, {geometry.num_kv_heads}, {geometry.head_dim}]")
        if slot_mapping.shape != (k.shape[0],) or slot_mapping.dtype != torch.int64:
            raise ValueError("slot_mapping must be int64 [num_tokens]")
        if check_scales(k_cache, v_cache, k_scale, v_scale):
            keep = slot_mapping >= 0  # slot -1: skip the token
            slots = slot_mapping[keep]
            write_quantised(k[keep], k_cache, k_scale, slots)  # type: ignore[arg-type]
            write_quantised(v[keep], v_cache, v_scale, slots)  # type: ignore[arg-type]
            return
        write_kv.write_kv(_last_contiguous(k), _last_contiguous(v), k_cache, v_cache, slot_mapping)

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
        batch = check_block_tables(block_tables, context_lens)
        scales = _scales(k_cache, v_cache, k_scale, v_scale)
        if cu_seqlens_q.shape != (batch + 1,) or cu_seqlens_q.dtype != torch.int32:
            raise ValueError("cu_seqlens_q must be int32 [batch + 1]")
        _check_runnable(k_cache)
        return prefill.prefill_attention(
            _last_contiguous(q),
            k_cache,
            v_cache,
            block_tables.contiguous(),
            cu_seqlens_q,
            context_lens,
            scale,
            self.config,
            window,
            softcap,
            scales,
        )

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
        check_query(q, cache_geometry(k_cache, v_cache), k_cache)
        if check_block_tables(block_tables, context_lens) != q.shape[0]:
            raise ValueError("decode needs one query token per sequence")
        scales = _scales(k_cache, v_cache, k_scale, v_scale)
        _check_runnable(k_cache)
        return decode.decode_attention(
            _last_contiguous(q),
            k_cache,
            v_cache,
            block_tables.contiguous(),
            context_lens,
            scale,
            self.config,
            window,
            softcap,
            scales,
        )

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
        block_transfer.check_transfer(src_k, src_v, dst_k, dst_v, src_ids, dst_ids, src_scales, dst_scales)
        src_k, src_v, dst_k, dst_v = raw(src_k), raw(src_v), raw(dst_k), raw(dst_v)  # fp8 moves as bytes
        if src_k.device != dst_k.device:
            block_transfer.copy_across_devices(src_k, src_v, dst_k, dst_v, src_ids, dst_ids)
        elif _kernel_can_copy(src_k, src_v, dst_k, dst_v):
            copy_blocks.copy_blocks(src_k, src_v, dst_k, dst_v, src_ids, dst_ids, self.config)
        else:
            block_transfer.copy_within_device(src_k, src_v, dst_k, dst_v, src_ids, dst_ids)
        if src_scales is not None and dst_scales is not None:
            block_transfer.copy_scales(src_scales, dst_scales, src_ids, dst_ids)


def _scales(
    k_cache: torch.Tensor, v_cache: torch.Tensor, k_scale: torch.Tensor | None, v_scale: torch.Tensor | None
) -> tuple[torch.Tensor, torch.Tensor] | None:
    """The contiguous (k, v) scales of quantised pools (validated), None for float pools."""
    if not check_scales(k_cache, v_cache, k_scale, v_scale) or k_scale is None or v_scale is None:
        return None
    return k_scale.contiguous(), v_scale.contiguous()


def _runs_here(device: torch.device) -> bool:
    return device.type == "cuda" or (device.type == "cpu" and interpreted())


def _check_runnable(cache: torch.Tensor) -> None:
    if not _runs_here(cache.device):
        raise ValueError(
            f"triton kernels need CUDA tensors (CPU ones only under TRITON_INTERPRET=1), got "
            f"{cache.device}; use the 'reference' backend there"
        )


def _kernel_can_copy(*pools: torch.Tensor) -> bool:
    return _runs_here(pools[0].device) and all(p.is_contiguous() for p in pools)


def _last_contiguous(x: torch.Tensor) -> torch.Tensor:
    """x itself when its last axis is contiguous (the kernels' only stride assumption), else a copy."""
    return x if x.stride(-1) == 1 else x.contiguous()
