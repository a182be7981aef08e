"""Gemma 2 and Gemma 3 (text): Llama-style attention and a gated MLP, with Gemma's changes:

- embeddings scaled by ``sqrt(hidden_size)``; RMSNorm scales by ``1 + weight``;
- GeGLU (``gelu`` with the tanh approximation) instead of SwiGLU;
- "sandwich" norms: ``post_attention_layernorm`` normalises the attention *output* (in Llama it is the
  norm before the MLP), ``pre_feedforward_layernorm`` / ``post_feedforward_layernorm`` around the MLP;
- scores scaled by ``query_pre_attn_scalar ** -0.5``, not ``head_dim ** -0.5``;
- sliding-window layers (``sliding_window`` tokens) interleaved with global ones (``layer_types``;
  Gemma 2: every other layer, Gemma 3: five local per global);
- Gemma 2: attention-score and final-logit soft-capping (``c * tanh(x / c)``);
- Gemma 3: q/k RMSNorm per head, and local layers rotate with their own RoPE base (unscaled).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kvgate.workers.model.config import ModelConfig
from kvgate.workers.model.families.family import Family, LayerTarget, common_fields, hf_rope, require
from kvgate.workers.model.families.qwen3 import LAYER_WEIGHTS as QWEN3_WEIGHTS

LAYER_WEIGHTS: dict[str, LayerTarget] = {
    **QWEN3_WEIGHTS,  # Gemma 3 has q_norm / k_norm; Gemma 2 simply has no such tensors
    "post_attention_layernorm": ("attn_post_norm", None),
    "pre_feedforward_layernorm": ("mlp_norm", None),
    "post_feedforward_layernorm": ("mlp_post_norm", None),
}


def parse(config: Mapping[str, Any]) -> ModelConfig:
    """A Gemma 2 or Gemma 3 text config (transformers 4.x or 5.x spellings)."""
    require(config, "hidden_activation", ("gelu_pytorch_tanh",), "gelu_pytorch_tanh")
    if config.get("use_bidirectional_attention"):
        raise ValueError(
            f"{config['model_type']}: bidirectional attention (embedding models) is not supported"
        )
    gemma3 = config["model_type"] == "gemma3_text"
    theta, scaling, local_theta = _rope(config) if gemma3 else (*hf_rope(config), None)
    bias = bool(config.get("attention_bias", False))
    return ModelConfig(
        **{**common_fields(config, tie_default=True), "rope_theta": theta, "rope_scaling": scaling},
        qkv_bias=bias,
        o_bias=bias,
        hidden_act="gelu_tanh",
        norm_offset=1.0,
        embed_scale=config["hidden_size"] ** 0.5,
        sandwich_norms=True,
        qk_norm=gemma3,
        attn_scale=config["query_pre_attn_scalar"] ** -0.5,
        attn_softcap=config.get("attn_logit_softcapping"),
        final_softcap=config.get("final_logit_softcapping"),
        layer_windows=_windows(config, gemma3),
        local_rope_theta=local_theta,
    )


def _windows(config: Mapping[str, Any], gemma3: bool) -> tuple[int | None, ...]:
    """Each layer's window: ``layer_types`` when given, else Gemma 2's even layers / Gemma 3's five in
    six (``sliding_window_pattern``) are local."""
    layers, window = config["num_hidden_layers"], config.get("sliding_window")
    if not window:
        return ()
    types = config.get("layer_types")
    if types is None:
        pattern = config.get("sliding_window_pattern") or config.get("_sliding_window_pattern", 6)
        local = [(i + 1) % pattern != 0 if gemma3 else i % 2 == 0 for i in range(layers)]
        types = ["sliding_attention" if is_local else "full_attention" for is_local in local]
    unknown = set(types) - {"sliding_attention", "full_attention"}
    if unknown:
        raise ValueError(f"{config['model_type']}: layer types {sorted(unknown)} are not supported")
    return tuple(int(window) if kind == "sliding_attention" else None for kind in types)


def _rope(config: Mapping[str, Any]) -> tuple[float, Any, float]:
    """Gemma 3's global base and scaling, and its local layers' base: transformers 5 keeps one
    ``rope_parameters`` per layer type, transformers 4 ``rope_theta`` / ``rope_scaling`` for the global
    layers and ``rope_local_base_freq`` for the local ones."""
    params = config.get("rope_parameters") or {}
    if "full_attention" in params:
        theta, scaling = hf_rope({"rope_parameters": params["full_attention"]})
        local_theta, local_scaling = hf_rope({"rope_parameters": params.get("sliding_attention", {})})
        if local_scaling is not None:
            raise ValueError("gemma3_text: RoPE scaling on the sliding-window layers is not supported")
        return theta, scaling, local_theta
    theta, scaling = hf_rope(config)
    return theta, scaling, float(config.get("rope_local_base_freq", 10000.0))


GEMMA2 = Family("gemma2", parse, LAYER_WEIGHTS.get)
GEMMA3 = Family("gemma3_text", parse, LAYER_WEIGHTS.get)
