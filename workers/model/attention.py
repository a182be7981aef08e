"""Grouped-query self-attention over the paged KV cache, through an injected ``AttentionKernels``."""

from __future__ import annotations

import torch
from torch import nn

from kvgate.kernels.protocol import AttentionKernels
from kvgate.workers.model.config import ModelConfig
from kvgate.workers.model.epilogue import project_add
from kvgate.workers.model.gemm import Projection
from kvgate.workers.model.kv_cache import KVCache
from kvgate.workers.model.layers import RMSNorm
from kvgate.workers.model.lora import LayerLora
from kvgate.workers.model.metadata import AttentionMetadata, OutputRows
from kvgate.workers.model.rope import apply_rotary


class Attention(nn.Module):
    """``o(softmax(cap(q k^T * scale)) v)`` with RoPE on q and k; q, k, v come from one fused matmul
    (``qkv``: the q rows, then k, then v). Family options: an RMSNorm over each q and k head before RoPE
    (``q_norm`` / ``k_norm``), a score scale other than ``head_dim ** -0.5``, soft-capping ``cap``, and
    a sliding window for this layer. Writes the new tokens' K/V into the layer's cache."""

    def __init__(
        self, config: ModelConfig, layer: int, kernels: AttentionKernels, dtype: torch.dtype | None = None
    ) -> None:
        super().__init__()
        self.kernels = kernels
        self.num_heads, self.num_kv_heads = config.num_heads, config.num_kv_heads
        self.head_dim = config.head_dim
        self.sizes = [self.num_heads * self.head_dim, *[self.num_kv_heads * self.head_dim] * 2]
        self.scale, self.softcap = config.attention_scale, config.attn_softcap
        self.window = config.window_of(layer)
        self.qkv = Projection(config.hidden_size, sum(self.sizes), bias=config.qkv_bias, dtype=dtype)
        self.o = Projection(self.sizes[0], config.hidden_size, bias=config.o_bias, dtype=dtype)
        self.q_norm: nn.Module = nn.Identity()
        self.k_norm: nn.Module = nn.Identity()
        self.qk_norm = config.qk_norm
        if config.qk_norm:
            self.q_norm = RMSNorm(self.head_dim, config.rms_norm_eps, config.norm_offset, dtype)
            self.k_norm = RMSNorm(self.head_dim, config.rms_norm_eps, config.norm_offset, dtype)

    def forward(
        self,
        x: torch.Tensor,
        cos: torch.Tensor,
        sin: torch.Tensor,
        attn: AttentionMetadata,
        cache: KVCache,
        lora: LayerLora | None = None,
        rows: OutputRows | None = None,
        residual: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """x ``[T, hidden]``, cos / sin ``[T, rotary dims]`` -> ``[T, hidden]``; mutates ``cache``.
        ``lora``: the step's adapters' updates of ``qkv`` and ``o``, if any. ``rows``: compute the
        output of these rows only (``[R, hidden]``, in their order); K/V are written for all ``T``.
        ``residual`` (``[T or R, hidden]``): added to the output (in ``o``'s product where it fuses)."""
        qkv = self.qkv(x)
        if lora is not None:
            lora.add("attn.qkv", x, qkv)
        q, k, v = self._heads(qkv, cos, sin)
        scales = {"k_scale": cache.k_scale, "v_scale": cache.v_scale}  # None for float pools
        self.kernels.write_kv(k, v, cache.k, cache.v, attn.slot_mapping, **scales)
        if rows is not None:
            if rows.attn is None:
                return x.new_empty(0, x.shape[1])
            q, attn = q[rows.indices], rows.attn
        out = self._attend(q, attn, cache).reshape(q.shape[0], self.sizes[0])  # [T or R, H * D]
        if lora is None and residual is not None:
            return project_add(self.o, out, residual)
        projected = self.o(out)
        if lora is not None:
            lora.add("attn.o", out, projected)
        return projected if residual is None else projected.add_(residual)

    def _heads(
        self, qkv: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """q ``[T, H, D]``, k and v ``[T, KV, D]`` of ``qkv`` ``[T, (H + 2 KV) * D]``: q and k through their
        norms (if any) and RoPE (together, as one ``[T, H + KV, D]``, when there are no norms); v a view."""
        heads = qkv.unflatten(-1, (-1, self.head_dim))  # [T, H + 2 KV, D]
        rotated = self.num_heads + self.num_kv_heads
        v = heads[:, rotated:]
        if not self.qk_norm:
            qk = apply_rotary(heads[:, :rotated], cos, sin)
            return qk[:, : self.num_heads], qk[:, self.num_heads :], v
        q = apply_rotary(self.q_norm(heads[:, : self.num_heads]), cos, sin)
        return q, apply_rotary(self.k_norm(heads[:, self.num_heads : rotated]), cos, sin), v

    def _attend(self, q: torch.Tensor, attn: AttentionMetadata, cache: KVCache) -> torch.Tensor:
        options = {
            "window": self.window,
            "softcap": self.softcap,
            "k_scale": cache.k_scale,
            "v_scale": cache.v_scale,
        }
        if attn.cu_seqlens_q is None:
            return self.kernels.decode_attention(
                q, cache.k, cache.v, attn.block_tables, attn.context_lens, self.scale, **options
            )
        return self.kernels.prefill_attention(
            q,
            cache.k,
            cache.v,
            attn.block_tables,
            attn.cu_seqlens_q,
            attn.context_lens,
            self.scale,
            **options,
        )
