"""``ModelConfig``: the shape of a supported decoder, read from a HF ``config.json`` or GGUF metadata.

One config covers every supported family (see ``families``): Llama 2/3, Mistral, Qwen2/2.5 and SmolLM2
differ only in sizes, biases, RoPE and a tied output head; Qwen3, Gemma 2/3, Phi-3 and Mixtral add the
options below the sizes, each off (the Llama behaviour) by default. HF configs are parsed by
``families.model_config``, GGUF metadata by ``ModelConfig.from_gguf``.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from kvgate.common.tokenizer.gguf_metadata import GGUFMetadata, architecture_key
from kvgate.proto.layout import KVGeometry

GGUF_ARCHITECTURES = frozenset({"llama", "qwen2"})
_SIZES = ("vocab_size", "hidden_size", "intermediate_size", "num_layers", "num_heads", "num_kv_heads",
          "head_dim", "max_position_embeddings")  # fmt: skip
Activation = Literal["silu", "gelu_tanh"]


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
class MoEConfig:
    """A sparse feed-forward: each token goes through ``experts_per_token`` of ``num_experts`` SwiGLU
    experts of width ``intermediate_size``, chosen by the largest router probabilities (softmax over all
    experts); the outputs are summed weighted by those probabilities, renormalised to sum to 1 when
    ``renormalize`` (Mixtral always; Qwen3-MoE when ``norm_topk_prob``)."""

    num_experts: int
    experts_per_token: int
    intermediate_size: int
    renormalize: bool = True


@dataclass(frozen=True, slots=True)
class ModelConfig:
    """Sizes and options of a decoder; validated on construction, never mutated."""

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
    # -- family options; the defaults are Llama's ---------------------------------------------------
    hidden_act: Activation = "silu"  # the gate's activation: SwiGLU (silu) or GeGLU (Gemma: gelu, tanh)
    norm_offset: float = 0.0  # RMSNorm scales by (offset + weight): Gemma stores weight - 1 (offset 1)
    embed_scale: float = 1.0  # embeddings times this (Gemma: sqrt(hidden_size))
    sandwich_norms: bool = False  # Gemma 2/3: RMSNorm on the attention and MLP outputs too
    qk_norm: bool = False  # Qwen3, Gemma 3: RMSNorm over each q and k head (head_dim) before RoPE
    attn_scale: float | None = (
        None  # scores times this; None: head_dim ** -0.5 (Gemma: query_pre_attn_scalar)
    )
    attn_softcap: float | None = None  # Gemma 2: scores -> c * tanh(scores / c) before the causal mask
    final_softcap: float | None = None  # Gemma 2: the same on the logits
    layer_windows: tuple[int | None, ...] = ()  # per layer: sliding window (keys a query sees, itself
    # included), None for a global layer; () = every layer global
    local_rope_theta: float | None = None  # Gemma 3: RoPE base of the sliding-window layers (unscaled)
    rotary_dim: int | None = None  # partial rotary (Phi-4-mini): the leading dims rotated; None: head_dim
    moe: MoEConfig | None = None  # Mixtral, Qwen3-MoE: a sparse feed-forward in every layer

    def kv_geometry(self, dtype: str) -> KVGeometry:
        """The KV cache geometry of this model with elements of ``dtype`` (a torch dtype's name)."""
        return KVGeometry(self.num_layers, self.num_kv_heads, self.head_dim, dtype)

    def __post_init__(self) -> None:
        for name in _SIZES:
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)}")
        if self.num_heads % self.num_kv_heads:
            raise ValueError(f"num_kv_heads={self.num_kv_heads} must divide num_heads={self.num_heads}")
        scaling = self.rope_scaling
        if (
            scaling is not None
            and scaling.kind == "factors"
            and len(scaling.freq_factors) != self.rotary_dims // 2
        ):
            raise ValueError(f"rope freq_factors must have rotary dims / 2 = {self.rotary_dims // 2} entries")
        if self.rotary_dims % 2 or not 0 < self.rotary_dims <= self.head_dim:
            raise ValueError(f"rotary_dim must be even, in (0, head_dim], got {self.rotary_dim}")
        if self.layer_windows and len(self.layer_windows) != self.num_layers:
            raise ValueError(
                f"layer_windows has {len(self.layer_windows)} entries for {self.num_layers} layers"
            )
        if any(w is not None and w < 1 for w in self.layer_windows):
            raise ValueError(f"sliding windows must be >= 1 token, got {self.layer_windows}")
        if self.moe is not None and not 0 < self.moe.experts_per_token <= self.moe.num_experts:
            raise ValueError(f"experts_per_token must be in [1, num_experts], got {self.moe}")

    @property
    def rotary_dims(self) -> int:
        """How many leading dims of each q and k head RoPE rotates."""
        return self.rotary_dim or self.head_dim

    @property
    def attention_scale(self) -> float:
        return self.attn_scale if self.attn_scale is not None else self.head_dim**-0.5

    def window_of(self, layer: int) -> int | None:
        """Layer ``layer``'s sliding window in tokens, None when it attends to the whole context."""
        return self.layer_windows[layer] if self.layer_windows else None

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


def _gguf_rope(metadata: GGUFMetadata, rope_freqs: Sequence[float] | None) -> RopeScaling | None:
    if rope_freqs is not None:
        return RopeScaling("factors", freq_factors=tuple(float(f) for f in rope_freqs))
    kind = architecture_key(metadata, "rope.scaling.type", "none")
    if kind == "none":
        return None
    if kind == "linear":
        return RopeScaling("linear", factor=float(architecture_key(metadata, "rope.scaling.factor")))
    raise ValueError(f"GGUF RoPE scaling {kind!r} is not supported (supported: none, linear, rope_freqs)")
