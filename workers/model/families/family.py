"""``Family``: what kvgate needs to know of one model family, and the HF config fields they share."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from kvgate.workers.model.config import ModelConfig, RopeScaling

log = logging.getLogger(__name__)

LayerTarget = tuple[str, str | None]  # (our module path in a layer, shard of a fused parameter or None)
LayerWeight = Callable[[str], LayerTarget | None]  # HF module path in a layer -> its target, if any


@dataclass(frozen=True, slots=True)
class Family:
    """One ``model_type``: ``parse`` turns its ``config.json`` into a ``ModelConfig`` (``ValueError`` for
    what is not implemented); ``layer_weight`` maps a HF module path inside a layer (``self_attn.q_proj``)
    to our module and shard, None for tensors the model does not use."""

    model_type: str
    parse: Callable[[Mapping[str, Any]], ModelConfig]
    layer_weight: LayerWeight


def common_fields(config: Mapping[str, Any], *, tie_default: bool = False) -> dict[str, Any]:
    """The ``ModelConfig`` fields every family spells alike: sizes, norm epsilon, RoPE, tokens."""
    heads = config["num_attention_heads"]
    theta, scaling = hf_rope(config)
    eos = config.get("eos_token_id")
    return {
        "vocab_size": config["vocab_size"],
        "hidden_size": config["hidden_size"],
        "intermediate_size": config["intermediate_size"],
        "num_layers": config["num_hidden_layers"],
        "num_heads": heads,
        "num_kv_heads": config.get("num_key_value_heads") or heads,
        "head_dim": config.get("head_dim") or config["hidden_size"] // heads,
        "rms_norm_eps": config.get("rms_norm_eps", 1e-6),
        "rope_theta": theta,
        "rope_scaling": scaling,
        "max_position_embeddings": config.get("max_position_embeddings", 4096),
        "tie_word_embeddings": bool(config.get("tie_word_embeddings", tie_default)),
        "bos_token_id": config.get("bos_token_id"),
        "eos_token_ids": tuple(eos if isinstance(eos, list) else [] if eos is None else [eos]),
        "architecture": config["model_type"],
    }


def require(config: Mapping[str, Any], key: str, allowed: tuple[Any, ...], default: Any = None) -> Any:
    """``config[key]`` (or ``default``), raising ``ValueError`` unless it is one of ``allowed``."""
    value = config.get(key, default)
    if value not in allowed:
        raise ValueError(
            f"{config.get('model_type')}: {key}={value!r} is not supported (supported: {list(allowed)})"
        )
    return value


def hf_rope(config: Mapping[str, Any]) -> tuple[float, RopeScaling | None]:
    """RoPE base and scaling from ``rope_parameters`` (transformers 5) or ``rope_theta`` +
    ``rope_scaling`` (transformers 4)."""
    params = config.get("rope_parameters") or config.get("rope_scaling") or {}
    theta = float(params.get("rope_theta", config.get("rope_theta", 10000.0)))
    kind = params.get("rope_type", params.get("type", "default"))
    if kind == "default":
        return theta, None
    if kind == "linear":
        return theta, RopeScaling("linear", factor=float(params["factor"]))
    if kind == "llama3":
        return theta, RopeScaling(
            "llama3",
            factor=float(params["factor"]),
            low_freq_factor=float(params["low_freq_factor"]),
            high_freq_factor=float(params["high_freq_factor"]),
            original_max_position_embeddings=int(params["original_max_position_embeddings"]),
        )
    raise ValueError(f"RoPE scaling {kind!r} is not supported (supported: default, linear, llama3)")


def window_capped(config: Mapping[str, Any]) -> int:
    """``max_position_embeddings``, capped at an active sliding window (Mistral, Qwen2: within the
    window, full attention is exact)."""
    limit = config.get("max_position_embeddings", 4096)
    window = config.get("sliding_window")
    if window and config.get("use_sliding_window", True) and window < limit:
        log.warning(
            "sliding window %d < max_position_embeddings %d: contexts capped at the window", window, limit
        )
        return window
    return limit


def all_layers(config: Mapping[str, Any]) -> tuple[int | None, ...]:
    """One sliding window for every layer (Phi-3, Mixtral: ``sliding_window`` applies to all), or ()."""
    window = config.get("sliding_window")
    return (int(window),) * config["num_hidden_layers"] if window else ()
