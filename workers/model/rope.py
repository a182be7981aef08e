"""Rotary position embeddings (RoPE), rotate-half layout as in Hugging Face, with frequency scaling.

Frequency ``i`` of ``R`` rotated dims (``R`` = head_dim, or fewer with partial rotary) is
``theta ** (-2i / R)`` (i < R/2), optionally stretched by a ``RopeScaling``. Dimension ``j`` and
``j + R/2`` of a query or key form one rotated pair; dims from ``R`` on pass unrotated:

    x' = x * cos(p * f) + rotate_half(x) * sin(p * f),   rotate_half([a, b]) = [-b, a]
"""

from __future__ import annotations

import math

import torch
from torch import nn

from kvgate.workers.model.config import RopeScaling


def inverse_frequencies(dims: int, theta: float, scaling: RopeScaling | None) -> torch.Tensor:
    """The rotation frequency of each dimension pair: fp32 ``[dims / 2]`` on the default device."""
    exponents = torch.arange(0, dims, 2, dtype=torch.int64).float() / dims
    inv_freq = 1.0 / (theta**exponents)  # [R/2]
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
    """cos / sin of every token's rotation angles over ``dims`` rotated dims, from its absolute position."""

    inv_freq: torch.Tensor

    def __init__(self, dims: int, theta: float, scaling: RopeScaling | None = None) -> None:
        super().__init__()
        self.dims, self.theta, self.scaling = dims, theta, scaling
        self.register_buffer("inv_freq", torch.empty(dims // 2), persistent=False)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """(Re)compute ``inv_freq`` in fp32 on its current device; needed after ``to_empty``."""
        self.inv_freq = inverse_frequencies(self.dims, self.theta, self.scaling).to(self.inv_freq.device)

    def forward(self, positions: torch.Tensor, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
        """positions int ``[T]`` -> cos, sin ``[T, dims]`` in ``dtype`` (angles in fp32)."""
        angles = positions.float()[:, None] * self.inv_freq[None, :]  # [T, R/2]
        angles = torch.cat([angles, angles], dim=-1)  # [T, R]: pair (j, j + R/2) shares an angle
        return angles.cos().to(dtype), angles.sin().to(dtype)


def apply_rotary(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate the first ``R`` dims of x ``[T, heads, D]`` by cos, sin ``[T, R]`` (``R <= D``; the
    rest pass unchanged); returns a new ``[T, heads, D]``."""
    dims = cos.shape[-1]
    if dims < x.shape[-1]:
        return torch.cat([apply_rotary(x[..., :dims], cos, sin), x[..., dims:]], dim=-1)
    half = dims // 2
    sin = sin[:, None, :]
    out = x * cos[:, None, :]
    out[..., :half] -= x[..., half:] * sin[..., :half]  # + rotate_half(x) * sin, without building it
    out[..., half:] += x[..., :half] * sin[..., half:]
    return out
