"""Grouped-query self-attention over the paged KV cache, through an injected ``AttentionKernels``."""

from __future__ import annotations

import torch
from torch import nn

from kvgate.kernels.protocol import AttentionKernels
from kvgate.workers.model.config import ModelConfig
from kvgate.workers.model.kv_cache import KVCache
from kvgate.workers.model.metadata import AttentionMetadata
from kvgate.workers.model.rope import apply_rotary


class Attention(nn.Module):
    """``o(softmax(q k^T / sqrt(D)) v)`` with RoPE on q and k; q, k, v come from one fused matmul
    (``qkv``: the q rows, then k, then v). Writes the new tokens' K/V into the layer's cache."""

    def __init__(
        self, config: ModelConfig, kernels: AttentionKernels, dtype: torch.dtype | None = None
    ) -> None:
        super().__init__()
        self.kernels = kernels
        self.num_heads, self.num_kv_heads = config.num_heads, config.num_kv_heads
        self.head_dim = config.head_dim
        self.sizes = [self.num_heads * self.head_dim, *[self.num_kv_heads * self.head_dim] * 2]
        self.scale = self.head_dim**-0.5
        self.qkv = nn.Linear(config.hidden_size, sum(self.sizes), bias=config.qkv_bias, dtype=dtype)
        self.o = nn.Linear(self.sizes[0], config.hidden_size, bias=config.o_bias, dtype=dtype)

    def forward(
        self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, attn: AttentionMetadata, cache: KVCache
    ) -> torch.Tensor:
        """x ``[T, hidden]``, cos / sin ``[T, head_dim]`` -> ``[T, hidden]``; mutates ``cache``."""
        tokens = x.shape[0]
        q, k, v = self.qkv(x).split(self.sizes, dim=-1)
        q = apply_rotary(q.view(tokens, self.num_heads, self.head_dim), cos, sin)  # [T, H, D]
        k = apply_rotary(k.view(tokens, self.num_kv_heads, self.head_dim), cos, sin)  # [T, KV, D]
        v = v.reshape(tokens, self.num_kv_heads, self.head_dim)  # [T, KV, D]
        self.kernels.write_kv(k, v, cache.k, cache.v, attn.slot_mapping)
        out = self._attend(q, attn, cache)  # [T, H, D]
        return self.o(out.reshape(tokens, self.sizes[0]))

    def _attend(self, q: torch.Tensor, attn: AttentionMetadata, cache: KVCache) -> torch.Tensor:
        if attn.cu_seqlens_q is None:
            return self.kernels.decode_attention(
                q, cache.k, cache.v, attn.block_tables, attn.context_lens, self.scale
            )
        return self.kernels.prefill_attention(
            q, cache.k, cache.v, attn.block_tables, attn.cu_seqlens_q, attn.context_lens, self.scale
        )
