"""The position-wise layers of a Llama block: RMSNorm and the SwiGLU feed-forward."""

from __future__ import annotations

import torch
from torch import nn
from torch.nn.functional import silu


class RMSNorm(nn.Module):
    """``x / rms(x) * weight``, the mean of squares taken in fp32 over the last dimension."""

    def __init__(self, dim: int, eps: float, dtype: torch.dtype | None = None) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim, dtype=dtype))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x ``[..., dim]`` -> ``[..., dim]`` in x's dtype."""
        h = x.float()
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * h.to(x.dtype)


class SwiGLU(nn.Module):
    """``down(silu(gate(x)) * up(x))``; gate and up are one fused matmul (``gate_up``, gate rows first)."""

    def __init__(self, hidden: int, intermediate: int, bias: bool, dtype: torch.dtype | None = None) -> None:
        super().__init__()
        self.intermediate = intermediate
        self.gate_up = nn.Linear(hidden, 2 * intermediate, bias=bias, dtype=dtype)
        self.down = nn.Linear(intermediate, hidden, bias=bias, dtype=dtype)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x ``[T, hidden]`` -> ``[T, hidden]``."""
        gate, up = self.gate_up(x).split(self.intermediate, dim=-1)  # [T, I] each
        return self.down(silu(gate) * up)
