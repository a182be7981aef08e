"""The position-wise layers of a decoder block: RMSNorm and the gated feed-forward (SwiGLU / GeGLU)."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import torch
from torch import nn
from torch.nn.functional import silu

from kvgate.workers.model.config import Activation
from kvgate.workers.model.gemm import Projection
from kvgate.workers.model.lora import LayerLora

ACTIVATIONS: dict[Activation, Callable[[torch.Tensor], torch.Tensor]] = {  # in place: mutate their input
    "silu": partial(silu, inplace=True),  # SwiGLU
    "gelu_tanh": partial(torch.ops.aten.gelu_, approximate="tanh"),  # GeGLU (Gemma)
}


class RMSNorm(nn.Module):
    """``x / rms(x) * (offset + weight)``, the mean of squares taken in fp32 over the last dimension.
    With an offset (Gemma stores ``weight - 1``), the scaling is done in fp32 too, as Gemma does."""

    def __init__(self, dim: int, eps: float, offset: float = 0.0, dtype: torch.dtype | None = None) -> None:
        super().__init__()
        self.eps, self.offset = eps, offset
        self.weight = nn.Parameter(torch.ones(dim, dtype=dtype))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x ``[..., dim]`` -> ``[..., dim]`` in x's dtype."""
        h = x.float()  # x itself when fp32: never written below
        h = torch.mul(h, torch.rsqrt(h.pow(2).mean(-1, keepdim=True).add_(self.eps)))  # a new tensor
        if self.offset:
            return h.mul_(self.offset + self.weight.float()).to(x.dtype)
        return h.to(x.dtype).mul_(self.weight)


class GatedMLP(nn.Module):
    """``down(act(gate(x)) * up(x))``; gate and up are one fused matmul (``gate_up``, gate rows first)."""

    def __init__(
        self,
        hidden: int,
        intermediate: int,
        bias: bool,
        act: Activation = "silu",
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__()
        self.intermediate, self.act = intermediate, ACTIVATIONS[act]
        self.gate_up = Projection(hidden, 2 * intermediate, bias=bias, dtype=dtype)
        self.down = Projection(intermediate, hidden, bias=bias, dtype=dtype)

    def forward(self, x: torch.Tensor, lora: LayerLora | None = None) -> torch.Tensor:
        """x ``[T, hidden]`` -> ``[T, hidden]``; ``lora``: the step's adapters' updates, if any."""
        gate_up = self.gate_up(x)  # [T, 2I]
        if lora is not None:
            lora.add("mlp.gate_up", x, gate_up)
        gate, up = gate_up.split(self.intermediate, dim=-1)  # [T, I] each, views of gate_up
        h = self.act(gate).mul_(up)  # in place in gate_up's gate half: no new [T, I] tensor
        out = self.down(h)
        if lora is not None:
            lora.add("mlp.down", h, out)
        return out
