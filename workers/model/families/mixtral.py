"""Mixtral: Mistral's attention with a sparse MLP in every layer. The router (``block_sparse_moe.gate``)
scores ``num_local_experts`` SwiGLU experts (``w1`` gate, ``w3`` up, ``w2`` down); each token takes the
``num_experts_per_tok`` best after a softmax over all of them, weights renormalised to sum to 1.
A ``sliding_window`` applies to every layer."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from kvgate.workers.model.config import ModelConfig, MoEConfig
from kvgate.workers.model.families.family import Family, LayerTarget, all_layers, common_fields, require
from kvgate.workers.model.families.llama import LAYER_WEIGHTS as LLAMA_WEIGHTS

_EXPERT = re.compile(r"block_sparse_moe\.experts\.(\d+)\.(w1|w2|w3)")
_EXPERT_TARGETS = {"w1": ("gate_up", "gate"), "w3": ("gate_up", "up"), "w2": ("down", None)}


def parse(config: Mapping[str, Any]) -> ModelConfig:
    require(config, "hidden_act", ("silu",), "silu")
    moe = MoEConfig(
        num_experts=config["num_local_experts"],
        experts_per_token=config["num_experts_per_tok"],
        intermediate_size=config["intermediate_size"],
        renormalize=True,
    )
    return ModelConfig(**common_fields(config), layer_windows=all_layers(config), moe=moe)


def layer_weight(module: str) -> LayerTarget | None:
    match = _EXPERT.fullmatch(module)
    if match is not None:
        ours, shard = _EXPERT_TARGETS[match[2]]
        return f"mlp.experts.{match[1]}.{ours}", shard
    if module == "block_sparse_moe.gate":
        return "mlp.router", None
    return LLAMA_WEIGHTS.get(module)


MIXTRAL = Family("mixtral", parse, layer_weight)
