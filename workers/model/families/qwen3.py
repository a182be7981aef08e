"""Qwen3 and Qwen3-MoE: Llama-style blocks with an RMSNorm over each q and k head before RoPE (weights
``self_attn.q_norm`` / ``k_norm``, ``[head_dim]``); no q, k, v biases (unless ``attention_bias``).
Qwen3-MoE replaces every MLP by routed experts (``mlp.gate`` is the router, ``mlp.experts.E.*``)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from kvgate.workers.model.config import ModelConfig, MoEConfig
from kvgate.workers.model.families.family import Family, LayerTarget, common_fields, require, window_capped
from kvgate.workers.model.families.llama import LAYER_WEIGHTS as LLAMA_WEIGHTS

LAYER_WEIGHTS: dict[str, LayerTarget] = {
    **LLAMA_WEIGHTS,
    "self_attn.q_norm": ("attn.q_norm", None),
    "self_attn.k_norm": ("attn.k_norm", None),
}
_EXPERT = re.compile(r"mlp\.experts\.(\d+)\.(gate|up|down)_proj")
_EXPERT_TARGETS = {"gate": ("gate_up", "gate"), "up": ("gate_up", "up"), "down": ("down", None)}


def parse(config: Mapping[str, Any]) -> ModelConfig:
    """A Qwen3 config; an active sliding window caps the context, as for Qwen2."""
    require(config, "hidden_act", ("silu",), "silu")
    bias = bool(config.get("attention_bias", False))
    return ModelConfig(
        **{**common_fields(config), "max_position_embeddings": window_capped(config)},
        qkv_bias=bias,
        o_bias=bias,
        qk_norm=True,
    )


def parse_moe(config: Mapping[str, Any]) -> ModelConfig:
    """A Qwen3-MoE config: experts in every layer (``decoder_sparse_step`` 1, no ``mlp_only_layers``)."""
    require(config, "decoder_sparse_step", (1,), 1)
    if config.get("mlp_only_layers"):
        raise ValueError("qwen3_moe: dense mlp_only_layers are not supported")
    moe = MoEConfig(
        num_experts=config.get("num_experts") or config["num_local_experts"],
        experts_per_token=config["num_experts_per_tok"],
        intermediate_size=config["moe_intermediate_size"],
        renormalize=bool(config.get("norm_topk_prob", False)),
    )
    return replace(parse(config), moe=moe)


def moe_layer_weight(module: str) -> LayerTarget | None:
    match = _EXPERT.fullmatch(module)
    if match is not None:
        ours, shard = _EXPERT_TARGETS[match[2]]
        return f"mlp.experts.{match[1]}.{ours}", shard
    if module == "mlp.gate":
        return "mlp.router", None
    return LAYER_WEIGHTS.get(module)


QWEN3 = Family("qwen3", parse, LAYER_WEIGHTS.get)
QWEN3_MOE = Family("qwen3_moe", parse_moe, moe_layer_weight)
