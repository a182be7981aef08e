"""Tiny random-weight Hugging Face models of each supported family, saved as safetensors directories.

Weights are drawn wider than ``transformers``' init (std 0.02 makes every logit nearly equal, so greedy
ties would test rounding, not the model), and norms and biases are randomised too: with norms of 1 and
biases of 0, a swapped norm or a dropped bias would go unnoticed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

COMMON = {
    "vocab_size": 320,
    "hidden_size": 64,
    "intermediate_size": 96,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "max_position_embeddings": 512,
    "rms_norm_eps": 1e-5,
    "initializer_range": 0.15,
    "bos_token_id": None,
    "eos_token_id": None,
    "pad_token_id": None,
}
LLAMA3_ROPE = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
               "original_max_position_embeddings": 64}  # fmt: skip

# name -> (transformers config class, its arguments)
VARIANTS: dict[str, tuple[str, dict[str, Any]]] = {
    "llama-gqa": ("LlamaConfig", {"rope_parameters": {"rope_type": "default", "rope_theta": 10000.0}}),
    "llama-mha-tied-linear-rope": ("LlamaConfig", {
        "num_key_value_heads": 4, "tie_word_embeddings": True,
        "rope_parameters": {"rope_type": "linear", "rope_theta": 10000.0, "factor": 4.0},
    }),
    "llama3-rope-head-dim-32": ("LlamaConfig", {
        "head_dim": 32, "rope_parameters": {**LLAMA3_ROPE, "rope_theta": 500000.0},
    }),
    "qwen2-biases-tied": ("Qwen2Config", {"tie_word_embeddings": True, "use_sliding_window": False}),
    "mistral": ("MistralConfig", {"sliding_window": None}),
    # head_dim 32 != hidden / heads: the q/k norms are over head_dim
    "qwen3": ("Qwen3Config", {"head_dim": 32, "rope_parameters": {"rope_type": "default",
                                                                  "rope_theta": 1e6}}),
    # windows of 8 tokens (2 blocks of 4) on layer 0, a global layer 1; caps small enough to bite; a score
    # scale other than head_dim's; Gemma 3's global RoPE scaled and its local one at another base
    "gemma2": ("Gemma2Config", {
        "head_dim": 16, "query_pre_attn_scalar": 24, "sliding_window": 8,
        "attn_logit_softcapping": 4.0, "final_logit_softcapping": 3.0,
    }),
    "gemma3": ("Gemma3TextConfig", {
        "head_dim": 16, "query_pre_attn_scalar": 24, "sliding_window": 8,
        "layer_types": ["sliding_attention", "full_attention"],
        "rope_parameters": {
            "full_attention": {"rope_type": "linear", "factor": 2.0, "rope_theta": 1e6},
            "sliding_attention": {"rope_type": "default", "rope_theta": 1e4},
        },
    }),
    # fused qkv / gate_up checkpoints, half the head rotated, a 12-token window on every layer
    "phi3": ("Phi3Config", {"partial_rotary_factor": 0.5, "sliding_window": 12}),
    # routed experts: Mixtral renormalises the top 2 of 4; this Qwen3-MoE keeps the top 2 of 8 as they are
    "mixtral": ("MixtralConfig", {"num_local_experts": 4, "num_experts_per_tok": 2, "sliding_window": None}),
    "qwen3-moe": ("Qwen3MoeConfig", {
        "num_experts": 8, "num_experts_per_tok": 2, "moe_intermediate_size": 32, "norm_topk_prob": False,
    }),
}  # fmt: skip
# the families beyond Llama's, each also run through the engine (tests/workers/engine/test_family_parity.py)
FAMILY_VARIANTS = ("qwen3", "gemma2", "gemma3", "phi3", "mixtral", "qwen3-moe")


def save_tiny_model(variant: str, folder: Path, seed: int = 0, sizes: dict[str, Any] | None = None) -> Any:
    """Build the variant with random weights, save it to ``folder`` (config.json + model.safetensors)
    and return the ``transformers`` model (fp32, eval mode). ``sizes``: config fields to change, over
    ``COMMON`` and the variant's own (a larger model for benchmarks)."""
    import transformers

    class_name, overrides = VARIANTS[variant]
    config = getattr(transformers, class_name)(**{**COMMON, **overrides, **(sizes or {})})
    torch.manual_seed(seed)
    model = transformers.AutoModelForCausalLM.from_config(config, dtype=torch.float32).eval()
    with torch.no_grad():
        for name, param in model.named_parameters():
            if name.endswith("bias"):
                param.normal_(0.0, 0.5)
            elif "norm" in name:
                param.uniform_(0.5, 1.5)
    model.save_pretrained(folder)
    return model
