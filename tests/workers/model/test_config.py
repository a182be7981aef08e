"""``ModelConfig`` from HF ``config.json`` dicts (transformers 4 and 5 spellings) and from GGUF metadata."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from kvgate.workers.model import DecoderModel, MoEConfig, RopeScaling, model_config

LLAMA = {
    "model_type": "llama",
    "vocab_size": 128256,
    "hidden_size": 4096,
    "intermediate_size": 14336,
    "num_hidden_layers": 32,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "rms_norm_eps": 1e-5,
    "max_position_embeddings": 131072,
    "bos_token_id": 128000,
    "eos_token_id": [128001, 128008, 128009],
}
LLAMA31_ROPE = {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                "original_max_position_embeddings": 8192}  # fmt: skip


def test_llama31_in_the_transformers_4_spelling() -> None:
    config = model_config(
        {**LLAMA, "rope_theta": 500000.0, "rope_scaling": {"rope_type": "llama3", **LLAMA31_ROPE}}
    )
    assert (config.head_dim, config.num_kv_heads, config.rope_theta) == (128, 8, 500000.0)
    assert config.rope_scaling == RopeScaling("llama3", 8.0, 1.0, 4.0, 8192)
    assert config.eos_token_ids == (128001, 128008, 128009)
    assert (config.qkv_bias, config.o_bias, config.tie_word_embeddings) == (False, False, False)


def test_rope_parameters_in_the_transformers_5_spelling() -> None:
    params = {"rope_type": "linear", "rope_theta": 1e6, "factor": 2.0}
    config = model_config({**LLAMA, "rope_parameters": params, "eos_token_id": 2})
    assert (config.rope_theta, config.rope_scaling) == (1e6, RopeScaling("linear", factor=2.0))
    assert config.eos_token_ids == (2,)


def test_qwen2_has_qkv_biases_and_an_inactive_window() -> None:
    qwen = {**LLAMA, "model_type": "qwen2", "sliding_window": 4096, "use_sliding_window": False,
            "tie_word_embeddings": True}  # fmt: skip
    config = model_config(qwen)
    assert (config.qkv_bias, config.o_bias, config.tie_word_embeddings) == (True, False, True)
    assert config.max_position_embeddings == 131072


def test_an_active_sliding_window_caps_the_context() -> None:
    config = model_config({**LLAMA, "model_type": "mistral", "sliding_window": 4096})
    assert config.max_position_embeddings == 4096


def test_qwen3_normalises_q_and_k_heads() -> None:
    config = model_config({**LLAMA, "model_type": "qwen3", "head_dim": 128, "attention_bias": False})
    assert (config.qk_norm, config.qkv_bias, config.head_dim) == (True, False, 128)
    assert (config.layer_windows, config.moe) == ((), None)


GEMMA = {**LLAMA, "model_type": "gemma2", "head_dim": 256, "query_pre_attn_scalar": 144,
         "sliding_window": 4096, "attn_logit_softcapping": 50.0, "final_logit_softcapping": 30.0,
         "hidden_activation": "gelu_pytorch_tanh", "num_hidden_layers": 4}  # fmt: skip


def test_gemma2_in_the_transformers_4_spelling_alternates_local_and_global_layers() -> None:
    config = model_config(GEMMA)
    assert config.layer_windows == (4096, None, 4096, None)
    assert (config.attn_softcap, config.final_softcap, config.attn_scale) == (50.0, 30.0, 144**-0.5)
    assert (config.norm_offset, config.embed_scale, config.hidden_act) == (1.0, 4096**0.5, "gelu_tanh")
    assert (config.sandwich_norms, config.qk_norm) == (True, False)
    assert config.tie_word_embeddings  # Gemma's default
    assert config.max_position_embeddings == 131072  # a window never caps a Gemma's context


def test_gemma3_in_the_transformers_4_spelling() -> None:
    gemma3 = {**GEMMA, "model_type": "gemma3_text", "num_hidden_layers": 12, "sliding_window_pattern": 6,
              "rope_theta": 1e6, "rope_local_base_freq": 1e4, "attn_logit_softcapping": None,
              "final_logit_softcapping": None,
              "rope_scaling": {"rope_type": "linear", "factor": 8.0}}  # fmt: skip
    config = model_config(gemma3)
    assert config.layer_windows == (*[4096] * 5, None, *[4096] * 5, None)
    assert (config.rope_theta, config.local_rope_theta) == (1e6, 1e4)
    assert config.rope_scaling == RopeScaling("linear", factor=8.0)
    assert config.qk_norm
    assert (config.attn_softcap, config.final_softcap) == (None, None)


def test_gemma3_in_the_transformers_5_spelling() -> None:
    params = {"full_attention": {"rope_type": "default", "rope_theta": 1e6},
              "sliding_attention": {"rope_type": "default", "rope_theta": 1e4}}  # fmt: skip
    types = ["sliding_attention", "full_attention", "sliding_attention", "sliding_attention"]
    config = model_config(
        {**GEMMA, "model_type": "gemma3_text", "rope_parameters": params, "layer_types": types}
    )
    assert config.layer_windows == (4096, None, 4096, 4096)
    assert (config.rope_theta, config.rope_scaling, config.local_rope_theta) == (1e6, None, 1e4)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"hidden_activation": "gelu"}, "hidden_activation='gelu' is not supported"),
        ({"use_bidirectional_attention": True}, "bidirectional"),
        ({"layer_types": ["chunked_attention"] * 4}, "layer types"),
    ],
)
def test_unsupported_gemma_options_are_rejected(change: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        model_config({**GEMMA, **change})


PHI3 = {**LLAMA, "model_type": "phi3", "num_hidden_layers": 3, "sliding_window": 2047,
        "max_position_embeddings": 4096}  # fmt: skip


def test_phi3_windows_every_layer_and_reads_partial_rotary_in_both_spellings() -> None:
    config = model_config({**PHI3, "partial_rotary_factor": 0.75})  # transformers 4
    assert config.layer_windows == (2047, 2047, 2047)
    assert (config.rotary_dim, config.rotary_dims, config.max_position_embeddings) == (96, 96, 4096)
    params = {"rope_type": "default", "rope_theta": 1e4, "partial_rotary_factor": 0.5}  # transformers 5
    assert model_config({**PHI3, "rope_parameters": params}).rotary_dims == 64


def test_phi3_longrope_is_refused() -> None:
    longrope = {"type": "longrope", "short_factor": [1.0] * 64, "long_factor": [2.0] * 64}
    with pytest.raises(ValueError, match="RoPE scaling 'longrope' is not supported"):
        model_config({**PHI3, "rope_scaling": longrope})


def test_mixtral_and_qwen3_moe_route_to_experts() -> None:
    mixtral = model_config(
        {**LLAMA, "model_type": "mixtral", "num_local_experts": 8, "num_experts_per_tok": 2}
    )
    assert mixtral.moe == MoEConfig(8, 2, 14336, renormalize=True)
    assert mixtral.layer_windows == ()
    qwen = {**LLAMA, "model_type": "qwen3_moe", "num_experts": 128, "num_experts_per_tok": 8,
            "moe_intermediate_size": 768, "norm_topk_prob": True}  # fmt: skip
    config = model_config(qwen)
    assert (config.moe, config.qk_norm) == (MoEConfig(128, 8, 768, renormalize=True), True)
    with pytest.raises(ValueError, match="mlp_only_layers"):
        model_config({**qwen, "mlp_only_layers": [0]})
    with pytest.raises(ValueError, match="decoder_sparse_step=2"):
        model_config({**qwen, "decoder_sparse_step": 2})


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"model_type": "gpt2"}, r"model_type 'gpt2' is not supported; supported: .*llama.*qwen3"),
        ({"hidden_act": "gelu"}, "hidden_act"),
        ({"rope_scaling": {"rope_type": "yarn", "factor": 4.0}}, "RoPE scaling 'yarn'"),
        ({"num_key_value_heads": 5}, "must divide"),
    ],
)
def test_unsupported_configs_are_rejected(change: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        model_config({**LLAMA, **change})


def test_freq_factors_must_cover_half_the_head() -> None:
    with pytest.raises(ValueError, match="freq_factors"):
        replace(model_config(LLAMA), rope_scaling=RopeScaling("factors", freq_factors=(1.0,)))


@pytest.mark.slow
def test_smollm2_config_from_gguf_metadata(smollm2: DecoderModel) -> None:
    config = smollm2.config
    assert config.architecture == "llama"
    sizes = (config.vocab_size, config.hidden_size, config.intermediate_size, config.num_layers)
    assert sizes == (49152, 576, 1536, 30)
    assert (config.num_heads, config.num_kv_heads, config.head_dim) == (9, 3, 64)
    assert (config.rope_theta, config.rope_scaling, config.max_position_embeddings) == (100000.0, None, 8192)
    assert config.tie_word_embeddings  # the file has no output.weight
    assert (config.bos_token_id, config.eos_token_ids) == (1, (2,))
