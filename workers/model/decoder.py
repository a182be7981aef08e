"""The decoder of every supported family (Llama, Mistral, Qwen2/3, Gemma 2/3, Phi-3, Mixtral, ...) over
a paged KV cache; the families differ only in ``ModelConfig`` options (see ``families``).

Per layer, on the flat batch ``x [T, hidden]`` of one step (see ``metadata``):

    h = x + PostNorm(Attention(RMSNorm(x)))      # RoPE, GQA, K/V written to the paged cache
    x = h + PostNorm(MLP(RMSNorm(h)))            # MLP: SwiGLU / GeGLU, or routed experts (MoE)

``PostNorm`` is an RMSNorm in Gemma ("sandwich" norms) and the identity elsewhere. The input is the
embedding times ``embed_scale``; logits ``= cap(RMSNorm(x)[rows] @ W_out^T)`` only for the rows the
step asks for (``cap``: Gemma 2's final soft-capping, else the identity). ``W_out`` is the embedding
matrix itself when the model ties them. Sliding-window layers rotate with their own RoPE base when the
family has one (Gemma 3). Run it under ``torch.inference_mode()``; on the CPU, the caller sets torch's
thread count.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from kvgate.kernels.protocol import AttentionKernels
from kvgate.workers.model.attention import Attention
from kvgate.workers.model.config import ModelConfig
from kvgate.workers.model.gemm import STANDARD, GemmPlan, Projection
from kvgate.workers.model.kv_cache import KVCache
from kvgate.workers.model.layers import GatedMLP, RMSNorm
from kvgate.workers.model.lora import LayerLora, LoraBatch
from kvgate.workers.model.metadata import AttentionMetadata, OutputRows
from kvgate.workers.model.moe import SparseMoE
from kvgate.workers.model.rope import RotaryEmbedding


def _norm(config: ModelConfig, dtype: torch.dtype | None) -> RMSNorm:
    return RMSNorm(config.hidden_size, config.rms_norm_eps, config.norm_offset, dtype)


def _post_norm(config: ModelConfig, dtype: torch.dtype | None) -> nn.Module:
    return _norm(config, dtype) if config.sandwich_norms else nn.Identity()


def _mlp(config: ModelConfig, dtype: torch.dtype | None) -> nn.Module:
    if config.moe is not None:
        return SparseMoE(config.hidden_size, config.moe, config.hidden_act, dtype)
    return GatedMLP(config.hidden_size, config.intermediate_size, config.mlp_bias, config.hidden_act, dtype)


class DecoderLayer(nn.Module):
    """Pre-norm attention and feed-forward, each with a residual connection (and a post-norm in Gemma)."""

    def __init__(
        self, config: ModelConfig, layer: int, kernels: AttentionKernels, dtype: torch.dtype | None = None
    ) -> None:
        super().__init__()
        self.attn_norm = _norm(config, dtype)
        self.attn = Attention(config, layer, kernels, dtype)
        self.attn_post_norm = _post_norm(config, dtype)
        self.mlp_norm = _norm(config, dtype)
        self.mlp = _mlp(config, dtype)
        self.mlp_post_norm = _post_norm(config, dtype)
        self.post_norms = config.sandwich_norms  # else each residual is added by the block's last product

    def forward(
        self,
        x: torch.Tensor,
        cos: torch.Tensor,
        sin: torch.Tensor,
        attn: AttentionMetadata,
        cache: KVCache,
        lora: LayerLora | None = None,
        rows: OutputRows | None = None,
    ) -> torch.Tensor:
        """x ``[T, hidden]`` -> ``[T, hidden]`` (``[R, hidden]``: the output of ``rows`` only); writes
        this layer's K/V of all ``T`` tokens into ``cache``. ``lora``: the step's adapter updates (a
        mixture of experts takes none: adapters of its experts are refused when they load)."""
        residual = x if rows is None else x[rows.indices]
        if self.post_norms:
            attended = self.attn(self.attn_norm(x), cos, sin, attn, cache, lora, rows)
            h = self.attn_post_norm(attended).add_(residual)  # new
            mlp_out = self._feed_forward(self.mlp_norm(h), lora)
            return self.mlp_post_norm(mlp_out).add_(h)  # residual added in place
        h = self.attn(self.attn_norm(x), cos, sin, attn, cache, lora, rows, residual)  # new
        return self._feed_forward(self.mlp_norm(h), lora, h)

    def _feed_forward(
        self, x: torch.Tensor, lora: LayerLora | None, residual: torch.Tensor | None = None
    ) -> torch.Tensor:
        """The MLP's output (a new tensor), plus ``residual`` when given (in its last product where
        that fuses); a mixture of experts takes no adapters."""
        if isinstance(self.mlp, GatedMLP):
            return self.mlp(x, lora, residual)
        out = self.mlp(x)
        return out if residual is None else out.add_(residual)


class DecoderModel(nn.Module):
    """The decoder with its embedding and output head; parameters in one dtype, RoPE angles in fp32."""

    def __init__(
        self, config: ModelConfig, kernels: AttentionKernels, dtype: torch.dtype | None = None
    ) -> None:
        super().__init__()
        self.config = config
        self.embed = nn.Embedding(config.vocab_size, config.hidden_size, dtype=dtype)
        self.rope = RotaryEmbedding(config.rotary_dims, config.rope_theta, config.rope_scaling)
        self.local_rope = (
            None
            if config.local_rope_theta is None
            else RotaryEmbedding(config.rotary_dims, config.local_rope_theta)
        )
        self.layers = nn.ModuleList(DecoderLayer(config, i, kernels, dtype) for i in range(config.num_layers))
        self.norm = _norm(config, dtype)
        tied = config.tie_word_embeddings
        self.lm_head = (
            None if tied else Projection(config.hidden_size, config.vocab_size, bias=False, dtype=dtype)
        )
        self.gemm: GemmPlan = STANDARD  # the output head's products (see gemm_tuning.install)

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
        lora: LoraBatch | None = None,
    ) -> torch.Tensor:
        """Run one step: input_ids, positions int64 ``[T]`` -> logits ``[len(attn.logits_indices), vocab]``
        in the parameters' dtype. Mutates ``kv_caches`` (one per layer) at ``attn.slot_mapping``.
        ``lora``: which rows run under which LoRA adapter (None: the base model for every row)."""
        x = self.embed(input_ids)  # [T, hidden]
        if self.config.embed_scale != 1.0:
            x = x * torch.tensor(self.config.embed_scale, dtype=x.dtype)  # rounded to x's dtype, as Gemma
        rotation = self.rope(positions, x.dtype)  # cos, sin [T, rotary dims] each
        local = rotation if self.local_rope is None else self.local_rope(positions, x.dtype)
        rows = attn.output_rows if lora is None else None  # adapters' rows are the step's: all of them
        last = len(self.layers) - 1
        for i, (layer, cache) in enumerate(zip(self.layers, kv_caches, strict=True)):
            cos, sin = rotation if layer.attn.window is None else local
            layer_lora = None if lora is None else lora.at(i)
            x = layer(x, cos, sin, attn, cache, layer_lora, rows if i == last else None)  # [T, hidden]
        x = self.norm(x if rows is not None else x[attn.logits_indices])  # [B', hidden]
        logits = self.gemm.project(x, self.output_weight)  # [B', vocab]
        cap = self.config.final_softcap
        return logits if cap is None else torch.tanh(logits / cap) * cap
