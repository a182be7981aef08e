"""Llama 2/3, Mistral, Qwen2/2.5 and SmolLM2: pre-norm blocks, RoPE, GQA, SwiGLU; they differ in sizes,
biases (Qwen2: q, k, v), RoPE base and scaling and a tied output head."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kvgate.workers.model.config import ModelConfig
from kvgate.workers.model.families.family import Family, LayerTarget, common_fields, require, window_capped

# HF module path in a layer -> (our module path, shard of a fused parameter or None)
LAYER_WEIGHTS: dict[str, LayerTarget] = {
    "input_layernorm": ("attn_norm", None),
    "post_attention_layernorm": ("mlp_norm", None),
    "self_attn.q_proj": ("attn.qkv", "q"),
    "self_attn.k_proj": ("attn.qkv", "k"),
    "self_attn.v_proj": ("attn.qkv", "v"),
    "self_attn.o_proj": ("attn.o", None),
    "mlp.gate_proj": ("mlp.gate_up", "gate"),
    "mlp.up_proj": ("mlp.gate_up", "up"),
    "mlp.down_proj": ("mlp.down", None),
}


def parse(config: Mapping[str, Any]) -> ModelConfig:
    """A Llama-family config; an active sliding window caps the context (see ``window_capped``)."""
    require(config, "hidden_act", ("silu",), "silu")
    bias = bool(config.get("attention_bias", False))
    return ModelConfig(
        **{**common_fields(config), "max_position_embeddings": window_capped(config)},
        qkv_bias=config["model_type"] == "qwen2" or bias,
        o_bias=bias,
        mlp_bias=bool(config.get("mlp_bias", False)),
    )


LLAMA = Family("llama", parse, LAYER_WEIGHTS.get)
MISTRAL = Family("mistral", parse, LAYER_WEIGHTS.get)
QWEN2 = Family("qwen2", parse, LAYER_WEIGHTS.get)
