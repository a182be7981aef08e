"""The position-wise layers of a decoder block: RMSNorm and the gated feed-forward (SwiGLU / GeGLU)."""

from __future__ import annotations

import torch
from torch import nn

from kvgate.workers.model.config import Activation
from kvgate.workers.model.epilogue import ACTIVATIONS, fused_act, fused_mul, fuses, project_add
from kvgate.workers.model.gemm import Projection
from kvgate.workers.model.lora import LayerLora


class RMSNorm(nn.Module):
    """``x / rms(x) * (offset + weight)``, the mean of squares taken in fp32 over the last dimension.
    With an offset (Gemma stores ``weight - 1``), the scaling is done in fp32 too, as Gemma does."""

    def __init__(self, dim: int, eps: float, offset: float = 0.0, dtype: torch.dtype | None = None) -> None:
        super().__init__()
        self.eps, self.offset = eps, offset
        self.weight = nn.Parameter(torch.ones(dim, dtype=dtype))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x ``[..., dim]`` -> ``[..., dim]`` in x's dtype."""
        h = x.float()  # a new tensor, or x itself when fp32 (then never written)
        scale = torch.rsqrt(h.pow(2).mean(-1, keepdim=True).add_(self.eps))  # [..., 1]
        h = h * scale if h is x else h.mul_(scale)  # a new tensor
        if self.offset:
            return h.mul_(self.offset + self.weight.float()).to(x.dtype)
        return h.to(x.dtype).mul_(self.weight)


class GatedMLP(nn.Module):
    """``down(act(gate(x)) * up(x))``; gate and up are one fused matmul (``gate_up``, gate rows first).
    Prefill-sized inputs without adapters run the activation, the gate product and a residual as the
    epilogues of the products that precede them where :func:`~kvgate.workers.model.epilogue.fuses`."""

    def __init__(
        self,
        hidden: int,
        intermediate: int,
        bias: bool,
        act: Activation = "silu",
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__()
        self.intermediate, self.act_name, self.act = intermediate, act, ACTIVATIONS[act]
        self.gate_up = Projection(hidden, 2 * intermediate, bias=bias, dtype=dtype)
        self.down = Projection(intermediate, hidden, bias=bias, dtype=dtype)

    def forward(
        self, x: torch.Tensor, lora: LayerLora | None = None, residual: torch.Tensor | None = None
    ) -> torch.Tensor:
        """x ``[T, hidden]`` -> ``[T, hidden]`` (plus ``residual [T, hidden]`` when given); ``lora``: the
        step's adapters' updates, if any."""
        if lora is None and fuses(x, self.gate_up.weight):
            return self._fused(x, residual)
        gate_up = self.gate_up(x)  # [T, 2I]
        if lora is not None:
            lora.add("mlp.gate_up", x, gate_up)
        gate, up = gate_up.split(self.intermediate, dim=-1)  # [T, I] each, views of gate_up
        h = self.act(gate).mul_(up)  # in place in gate_up's gate half: no new [T, I] tensor
        out = self.down(h)
        if lora is not None:
            lora.add("mlp.down", h, out)
        return out if residual is None else out.add_(residual)

    def _fused(self, x: torch.Tensor, residual: torch.Tensor | None) -> torch.Tensor:
        """The forward as three products with their epilogues: ``a = act(gate(x))``, ``h = up(x) * a``,
        ``down(h) (+ residual)``."""
        size, weight, bias = self.intermediate, self.gate_up.weight, self.gate_up.bias
        gate_bias, up_bias = (None, None) if bias is None else bias.split(size)
        h = fused_act(x, weight[:size], gate_bias, self.act_name)
        h = fused_mul(x, weight[size:], up_bias, h)
        return self.down(h) if residual is None else project_add(self.down, h, residual)
