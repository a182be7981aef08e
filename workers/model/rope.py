"""Rotary position embeddings (RoPE), rotate-half layout as in Hugging Face, with frequency scaling.

Frequency ``i`` of a head of size D is ``theta ** (-2i / D)`` (i < D/2), optionally stretched by a
``RopeScaling``. Dimension ``j`` and ``j + D/2`` of a query or key form one rotated pair:

    x' = x * cos(p * f) + rotate_half(x) * sin(p * f),   rotate_half([a, b]) = [-b, a]
"""

from __future__ import annotations

import math

import torch
from torch import nn

from kvgate.workers.model.config import ModelConfig, RopeScaling


def inverse_frequencies(head_dim: int, theta: float, scaling: RopeScaling | None) -> torch.Tensor:
    """The rotation frequency of each dimension pair: fp32 ``[head_dim / 2]`` on the default device."""
    exponents = torch.arange(0, head_dim, 2, dtype=torch.int64).float() / head_dim
    inv_freq = 1.0 / (theta**exponents)  # [D/2]
    if scaling is None:
        return inv_freq
    if scaling.kind == "linear":
        return inv_freq / scaling.factor
    if scaling.kind == "factors":
        return inv_freq / torch.tensor(scaling.freq_factors, dtype=torch.float32)
    return _llama3(inv_freq, scaling)


def _llama3(inv_freq: torch.Tensor, s: RopeScaling) -> torch.Tensor:
    """Llama 3.1's rule: wavelengths above ``original / low_freq_factor`` are divided by ``factor``,
    those below ``original / high_freq_factor`` kept, and the band between interpolated smoothly."""
    low_freq_wavelen = s.original_max_position_embeddings / s.low_freq_factor
    high_freq_wavelen = s.original_max_position_embeddings / s.high_freq_factor
    wavelen = 2 * math.pi / inv_freq
    scaled = torch.where(wavelen > low_freq_wavelen, inv_freq / s.factor, inv_freq)
    smooth = (s.original_max_position_embeddings / wavelen - s.low_freq_factor) / (
        s.high_freq_factor - s.low_freq_factor
    )
    smoothed = (1 - smooth) * scaled / s.factor + smooth * scaled
    medium = (wavelen >= high_freq_wavelen) & (wavelen <= low_freq_wavelen)
    return torch.where(medium, smoothed, scaled)


class RotaryEmbedding(nn.Module):
    """cos / sin of every token's rotation angles, from its absolute position."""

    inv_freq: torch.Tensor

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.config = config
        self.register_buffer("inv_freq", torch.empty(config.head_dim // 2), persistent=False)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """(Re)compute ``inv_freq`` in fp32 on its current device; needed after ``to_empty``."""
        freqs = inverse_frequencies(self.config.head_dim, self.config.rope_theta, self.config.rope_scaling)
        self.inv_freq = freqs.to(self.inv_freq.device)

    def forward(self, positions: torch.Tensor, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
        """positions int ``[T]`` -> cos, sin ``[T, head_dim]`` in ``dtype`` (angles in fp32)."""
        angles = positions.float()[:, None] * self.inv_freq[None, :]  # [T, D/2]
        angles = torch.cat([angles, angles], dim=-1)  # [T, D]: pair (j, j + D/2) shares an angle
        return angles.cos().to(dtype), angles.sin().to(dtype)


def apply_rotary(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate x ``[T, heads, D]`` by cos, sin ``[T, D]``; returns a new ``[T, heads, D]``."""
    half = x.shape[-1] // 2
    rotated = torch.cat([-x[..., half:], x[..., :half]], dim=-1)  # rotate_half
    return x * cos[:, None, :] + rotated * sin[:, None, :]
