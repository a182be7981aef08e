"""A Llama-family decoder (Llama 2/3, Mistral, Qwen2/2.5, SmolLM2) over a paged KV cache.

Per layer, on the flat batch ``x [T, hidden]`` of one step (see ``metadata``):

    h = x + Attention(RMSNorm(x))          # RoPE, GQA, K/V written to the paged cache
    x = h + SwiGLU(RMSNorm(h))

and logits ``= RMSNorm(x)[rows] @ W_out^T`` only for the rows the step asks for. ``W_out`` is the
embedding matrix itself when the model ties them. Run it under ``torch.inference_mode()``; on the CPU,
the caller sets torch's thread count.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn
from torch.nn.functional import linear

from kvgate.kernels.protocol import AttentionKernels
from kvgate.workers.model.attention import Attention
from kvgate.workers.model.config import ModelConfig
from kvgate.workers.model.kv_cache import KVCache
from kvgate.workers.model.layers import RMSNorm, SwiGLU
from kvgate.workers.model.metadata import AttentionMetadata
from kvgate.workers.model.rope import RotaryEmbedding


class DecoderLayer(nn.Module):
    """Pre-norm attention and feed-forward, each with a residual connection."""

    def __init__(
        self, config: ModelConfig, kernels: AttentionKernels, dtype: torch.dtype | None = None
    ) -> None:
        super().__init__()
        self.attn_norm = RMSNorm(config.hidden_size, config.rms_norm_eps, dtype)
        self.attn = Attention(config, kernels, dtype)
        self.mlp_norm = RMSNorm(config.hidden_size, config.rms_norm_eps, dtype)
        self.mlp = SwiGLU(config.hidden_size, config.intermediate_size, config.mlp_bias, dtype)

    def forward(
        self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, attn: AttentionMetadata, cache: KVCache
    ) -> torch.Tensor:
        """x ``[T, hidden]`` -> ``[T, hidden]``; writes this layer's K/V into ``cache``."""
        h = x + self.attn(self.attn_norm(x), cos, sin, attn, cache)
        return h + self.mlp(self.mlp_norm(h))


class LlamaModel(nn.Module):
    """The decoder with its embedding and output head; parameters in one dtype, RoPE angles in fp32."""

    def __init__(
        self, config: ModelConfig, kernels: AttentionKernels, dtype: torch.dtype | None = None
    ) -> None:
        super().__init__()
        self.config = config
        self.embed = nn.Embedding(config.vocab_size, config.hidden_size, dtype=dtype)
        self.rope = RotaryEmbedding(config)
        self.layers = nn.ModuleList(DecoderLayer(config, kernels, dtype) for _ in range(config.num_layers))
        self.norm = RMSNorm(config.hidden_size, config.rms_norm_eps, dtype)
        tied = config.tie_word_embeddings
        self.lm_head = (
            None if tied else nn.Linear(config.hidden_size, config.vocab_size, bias=False, dtype=dtype)
        )

    @property
    def output_weight(self) -> torch.Tensor:
        """``[vocab, hidden]``: the output head, or the embedding when they are tied."""
        return self.embed.weight if self.lm_head is None else self.lm_head.weight

    def forward(
        self,
        input_ids: torch.Tensor,
        positions: torch.Tensor,
        attn: AttentionMetadata,
        kv_caches: Sequence[KVCache],
    ) -> torch.Tensor:
        """Run one step: input_ids, positions int64 ``[T]`` -> logits ``[len(attn.logits_indices), vocab]``
        in the parameters' dtype. Mutates ``kv_caches`` (one per layer) at ``attn.slot_mapping``."""
        x = self.embed(input_ids)  # [T, hidden]
        cos, sin = self.rope(positions, x.dtype)  # [T, head_dim] each
        for layer, cache in zip(self.layers, kv_caches, strict=True):
            x = layer(x, cos, sin, attn, cache)  # [T, hidden]
        x = self.norm(x[attn.logits_indices])  # [B', hidden]
        return linear(x, self.output_weight)  # [B', vocab]
