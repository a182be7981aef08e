"""Phi-3 and Phi-4 (``model_type`` phi3): Llama-style blocks whose checkpoints already fuse q, k, v
(``qkv_proj``) and gate, up (``gate_up_proj``, gate rows first), loaded whole into our fused parameters.
Partial rotary (``partial_rotary_factor``, Phi-4-mini) rotates the leading dims of each head only. A
``sliding_window`` applies to every layer (Phi-3-mini: 2047). LongRoPE scaling (the 128k-context
variants, Phi-4-mini) is refused: its factors switch with the sequence length, which a prefix cache
would mix."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kvgate.workers.model.config import ModelConfig
from kvgate.workers.model.families.family import Family, LayerTarget, all_layers, common_fields, require

LAYER_WEIGHTS: dict[str, LayerTarget] = {
    "input_layernorm": ("attn_norm", None),
    "post_attention_layernorm": ("mlp_norm", None),
    "self_attn.qkv_proj": ("attn.qkv", None),
    "self_attn.o_proj": ("attn.o", None),
    "mlp.gate_up_proj": ("mlp.gate_up", None),
    "mlp.down_proj": ("mlp.down", None),
}


def parse(config: Mapping[str, Any]) -> ModelConfig:
    """A Phi-3 / Phi-4 config (transformers 4.x or 5.x spellings)."""
    require(config, "hidden_act", ("silu",), "silu")
    fields = common_fields(config)
    params = config.get("rope_parameters") or {}
    factor = float(params.get("partial_rotary_factor", config.get("partial_rotary_factor", 1.0)))
    return ModelConfig(
        **fields,
        rotary_dim=int(fields["head_dim"] * factor),
        layer_windows=all_layers(config),
    )


PHI3 = Family("phi3", parse, LAYER_WEIGHTS.get)
