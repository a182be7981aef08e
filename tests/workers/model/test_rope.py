"""RoPE frequencies and rotation: the scaling rules, and GGUF's precomputed factors agreeing with them."""

from __future__ import annotations

import math

import torch

from kvgate.workers.model import RopeScaling
from kvgate.workers.model.rope import apply_rotary, inverse_frequencies

LLAMA3 = RopeScaling("llama3", factor=8.0, low_freq_factor=1.0, high_freq_factor=4.0,
                     original_max_position_embeddings=8192)  # fmt: skip


def test_default_frequencies() -> None:
    inv_freq = inverse_frequencies(8, 10000.0, None)
    torch.testing.assert_close(inv_freq, torch.tensor([1.0, 0.1, 0.01, 0.001]))


def test_linear_scaling_divides_every_frequency() -> None:
    scaled = inverse_frequencies(64, 10000.0, RopeScaling("linear", factor=4.0))
    torch.testing.assert_close(scaled, inverse_frequencies(64, 10000.0, None) / 4)


def test_llama3_keeps_high_frequencies_and_divides_low_ones() -> None:
    base, scaled = inverse_frequencies(128, 500000.0, None), inverse_frequencies(128, 500000.0, LLAMA3)
    wavelen = 2 * math.pi / base
    high, low = wavelen < 8192 / 4, wavelen > 8192 / 1
    torch.testing.assert_close(scaled[high], base[high])
    torch.testing.assert_close(scaled[low], base[low] / 8)
    between = ~(high | low)
    assert between.any()
    assert ((scaled[between] < base[between]) & (scaled[between] > base[between] / 8)).all()


def test_gguf_freq_factors_reproduce_llama3() -> None:
    """llama.cpp stores Llama 3.1's scaling as ``rope_freqs``: per-frequency divisors."""
    base, scaled = inverse_frequencies(128, 500000.0, None), inverse_frequencies(128, 500000.0, LLAMA3)
    factors = RopeScaling("factors", freq_factors=tuple((base / scaled).tolist()))
    torch.testing.assert_close(inverse_frequencies(128, 500000.0, factors), scaled)


def test_rotation_pairs_dimension_j_with_j_plus_half() -> None:
    x = torch.zeros(1, 1, 4)
    x[0, 0, 0] = 1.0  # unit vector in dimension 0, rotated within the pair (0, 2)
    angle = torch.tensor(0.3)
    cos = torch.cat([angle.cos().repeat(2), angle.cos().repeat(2)])[None]  # [1, 4]
    sin = torch.cat([angle.sin().repeat(2), angle.sin().repeat(2)])[None]
    out = apply_rotary(x, cos, sin)[0, 0]
    torch.testing.assert_close(out, torch.tensor([angle.cos(), 0.0, angle.sin(), 0.0]))
