"""GGUF tensor names map to HF names, and llama.cpp's Q/K row permutation is undone exactly."""

from __future__ import annotations

import numpy as np
import pytest

from kvgate.workers.model.gguf_weights import hf_name, unpermute_rope_rows
from kvgate.workers.model.weights import target_of


def llama_cpp_permute(weights: np.ndarray, n_head: int) -> np.ndarray:
    """``permute`` of llama.cpp's convert_hf_to_gguf.py (LlamaModel), reproduced to test the inverse."""
    return (
        weights.reshape(n_head, 2, weights.shape[0] // n_head // 2, *weights.shape[1:])
        .swapaxes(1, 2)
        .reshape(weights.shape)
    )


@pytest.mark.parametrize(("heads", "head_dim"), [(9, 64), (3, 64), (4, 16)])
def test_unpermute_inverts_llama_cpp_permute(heads: int, head_dim: int) -> None:
    weight = np.random.default_rng(0).standard_normal((heads * head_dim, 24)).astype(np.float32)
    bias = np.arange(heads * head_dim, dtype=np.float32)
    np.testing.assert_array_equal(unpermute_rope_rows(llama_cpp_permute(weight, heads), heads), weight)
    np.testing.assert_array_equal(unpermute_rope_rows(llama_cpp_permute(bias, heads), heads), bias)


def test_permuted_rows_are_interleaved_pairs() -> None:
    """In llama.cpp's order, rows (2j, 2j+1) of a head are HF's rotate-half pair (j, j + D/2)."""
    hf_rows = np.arange(8, dtype=np.float32)  # one head, D = 8
    np.testing.assert_array_equal(llama_cpp_permute(hf_rows, 1), [0, 4, 1, 5, 2, 6, 3, 7])


@pytest.mark.parametrize(
    ("gguf", "hf", "target"),
    [
        ("token_embd.weight", "model.embed_tokens.weight", ("embed.weight", None)),
        ("output.weight", "lm_head.weight", ("lm_head.weight", None)),
        ("output_norm.weight", "model.norm.weight", ("norm.weight", None)),
        ("blk.3.attn_q.bias", "model.layers.3.self_attn.q_proj.bias", ("layers.3.attn.qkv.bias", "q")),
        ("blk.0.attn_v.weight", "model.layers.0.self_attn.v_proj.weight", ("layers.0.attn.qkv.weight", "v")),
        (
            "blk.12.ffn_up.weight",
            "model.layers.12.mlp.up_proj.weight",
            ("layers.12.mlp.gate_up.weight", "up"),
        ),
        (
            "blk.1.ffn_norm.weight",
            "model.layers.1.post_attention_layernorm.weight",
            ("layers.1.mlp_norm.weight", None),
        ),
        ("rope_freqs.weight", None, None),
    ],
)
def test_names_map_to_hf_and_to_our_parameters(gguf: str, hf: str | None, target: tuple | None) -> None:
    assert hf_name(gguf) == hf
    if hf is not None:
        assert target_of(hf) == target


def test_unknown_checkpoint_names_have_no_target() -> None:
    assert target_of("model.layers.0.self_attn.rotary_emb.inv_freq") is None
    assert target_of("model.vision_tower.weight") is None
