"""``ModelConfig``: the shape of a Llama-family decoder, read from a HF ``config.json`` or GGUF metadata.

One config covers Llama 2/3, Mistral, Qwen2/2.5 and SmolLM2: they differ only in sizes, biases, RoPE
(base and scaling) and whether the output head shares the embedding.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from kvgate.common.tokenizer.gguf_metadata import GGUFMetadata, architecture_key
from kvgate.proto.layout import KVGeometry

log = logging.getLogger(__name__)

HF_ARCHITECTURES = frozenset({"llama", "mistral", "qwen2"})
GGUF_ARCHITECTURES = frozenset({"llama", "qwen2"})
_SIZES = ("vocab_size", "hidden_size", "intermediate_size", "num_layers", "num_heads", "num_kv_heads",
          "head_dim", "max_position_embeddings")  # fmt: skip


@dataclass(frozen=True, slots=True)
class RopeScaling:
    """How RoPE frequencies are stretched for long contexts (none of it applies when the config has None).

    ``linear``: every frequency / ``factor``. ``llama3``: low frequencies / ``factor``, high ones kept,
    a smooth ramp between (wavelength bounds: ``original_max_position_embeddings`` / the two freq
    factors). ``factors``: frequency ``i`` / ``freq_factors[i]`` (GGUF's ``rope_freqs`` tensor, which
    llama.cpp precomputes from the same llama3 rule).
    """

    kind: Literal["linear", "llama3", "factors"]
    factor: float = 1.0
    low_freq_factor: float = 1.0
    high_freq_factor: float = 4.0
    original_max_position_embeddings: int = 8192
    freq_factors: tuple[float, ...] = ()


@dataclass(frozen=True, slots=True)
class ModelConfig:
    """Sizes and options of a Llama-family decoder; validated on construction, never mutated."""

    vocab_size: int
    hidden_size: int
    intermediate_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    rms_norm_eps: float
    rope_theta: float
    max_position_embeddings: int
    rope_scaling: RopeScaling | None = None
    tie_word_embeddings: bool = False
    qkv_bias: bool = False  # Qwen2: biases on the q, k, v projections
    o_bias: bool = False
    mlp_bias: bool = False
    bos_token_id: int | None = None
    eos_token_ids: tuple[int, ...] = ()
    architecture: str = "llama"

    def kv_geometry(self, dtype: str) -> KVGeometry:
        """The KV cache geometry of this model with elements of ``dtype`` (a torch dtype's name)."""
        return KVGeometry(self.num_layers, self.num_kv_heads, self.head_dim, dtype)

    def __post_init__(self) -> None:
        for name in _SIZES:
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)}")
        if self.num_heads % self.num_kv_heads:
            raise ValueError(f"num_kv_heads={self.num_kv_heads} must divide num_heads={self.num_heads}")
        if self.head_dim % 2:
            raise ValueError(f"RoPE needs an even head_dim, got {self.head_dim}")
        scaling = self.rope_scaling
        if (
            scaling is not None
            and scaling.kind == "factors"
            and len(scaling.freq_factors) != self.head_dim // 2
        ):
            raise ValueError(f"rope freq_factors must have head_dim / 2 = {self.head_dim // 2} entries")

    @classmethod
    def from_hf_config(cls, config: Mapping[str, Any]) -> ModelConfig:
        """From a parsed ``config.json`` (transformers 4.x ``rope_scaling`` or 5.x ``rope_parameters``).
        Raises ``ValueError`` for an architecture or option this decoder does not implement. A sliding
        window caps ``max_position_embeddings`` (within the window, attention is exact)."""
        kind = config.get("model_type")
        if kind not in HF_ARCHITECTURES:
            raise ValueError(f"model_type {kind!r} is not supported; supported: {sorted(HF_ARCHITECTURES)}")
        if config.get("hidden_act", "silu") != "silu":
            raise ValueError(f"hidden_act {config['hidden_act']!r} is not supported (SwiGLU needs silu)")
        heads = config["num_attention_heads"]
        theta, scaling = _hf_rope(config)
        bias = bool(config.get("attention_bias", False))
        eos = config.get("eos_token_id")
        return cls(
            vocab_size=config["vocab_size"],
            hidden_size=config["hidden_size"],
            intermediate_size=config["intermediate_size"],
            num_layers=config["num_hidden_layers"],
            num_heads=heads,
            num_kv_heads=config.get("num_key_value_heads") or heads,
            head_dim=config.get("head_dim") or config["hidden_size"] // heads,
            rms_norm_eps=config.get("rms_norm_eps", 1e-6),
            rope_theta=theta,
            max_position_embeddings=_window_capped(config),
            rope_scaling=scaling,
            tie_word_embeddings=bool(config.get("tie_word_embeddings", False)),
            qkv_bias=kind == "qwen2" or bias,
            o_bias=bias,
            mlp_bias=bool(config.get("mlp_bias", False)),
            bos_token_id=config.get("bos_token_id"),
            eos_token_ids=tuple(eos if isinstance(eos, list) else [] if eos is None else [eos]),
            architecture=kind,
        )

    @classmethod
    def from_gguf(
        cls, metadata: GGUFMetadata, tensor_names: Collection[str], rope_freqs: Sequence[float] | None = None
    ) -> ModelConfig:
        """From GGUF metadata; ``tensor_names`` tell biases and a separate output head apart from tied
        ones, ``rope_freqs`` is the file's ``rope_freqs.weight`` (Llama 3.1+ frequency factors) if any."""
        arch = metadata["general.architecture"]
        if arch not in GGUF_ARCHITECTURES:
            raise ValueError(f"GGUF architecture {arch!r} is not supported ({sorted(GGUF_ARCHITECTURES)})")

        def key(suffix: str, default: Any = None) -> Any:
            return architecture_key(metadata, suffix, default)

        hidden, heads = key("embedding_length"), key("attention.head_count")
        head_dim = key("attention.key_length") or hidden // heads
        if key("rope.dimension_count", head_dim) != head_dim:
            raise ValueError("partial rotary embeddings (rope.dimension_count != head_dim) are not supported")
        eos = (metadata.get(f"tokenizer.ggml.{kind}_token_id") for kind in ("eos", "eot", "eom"))
        return cls(
            vocab_size=key("vocab_size") or len(metadata["tokenizer.ggml.tokens"]),
            hidden_size=hidden,
            intermediate_size=key("feed_forward_length"),
            num_layers=key("block_count"),
            num_heads=heads,
            num_kv_heads=key("attention.head_count_kv") or heads,
            head_dim=head_dim,
            rms_norm_eps=key("attention.layer_norm_rms_epsilon", 1e-5),
            rope_theta=key("rope.freq_base", 10000.0),
            max_position_embeddings=key("context_length"),
            rope_scaling=_gguf_rope(metadata, rope_freqs),
            tie_word_embeddings="output.weight" not in tensor_names,
            qkv_bias="blk.0.attn_q.bias" in tensor_names,
            o_bias="blk.0.attn_output.bias" in tensor_names,
            bos_token_id=metadata.get("tokenizer.ggml.bos_token_id"),
            eos_token_ids=tuple(dict.fromkeys(i for i in eos if i is not None)),
            architecture=arch,
        )


def _hf_rope(config: Mapping[str, Any]) -> tuple[float, RopeScaling | None]:
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


def _gguf_rope(metadata: GGUFMetadata, rope_freqs: Sequence[float] | None) -> RopeScaling | None:
    if rope_freqs is not None:
        return RopeScaling("factors", freq_factors=tuple(float(f) for f in rope_freqs))
    kind = architecture_key(metadata, "rope.scaling.type", "none")
    if kind == "none":
        return None
    if kind == "linear":
        return RopeScaling("linear", factor=float(architecture_key(metadata, "rope.scaling.factor")))
    raise ValueError(f"GGUF RoPE scaling {kind!r} is not supported (supported: none, linear, rope_freqs)")


def _window_capped(config: Mapping[str, Any]) -> int:
    """``max_position_embeddings``, capped at an active sliding window."""
    limit = config.get("max_position_embeddings", 4096)
    window = config.get("sliding_window")
    if window and config.get("use_sliding_window", True) and window < limit:
        log.warning(
            "sliding window %d < max_position_embeddings %d: contexts capped at the window", window, limit
        )
        return window
    return limit
