"""A sparse feed-forward (mixture of experts): each token goes through its top-k of E gated MLPs.

The experts' weights are stacked, one tensor per kind across experts (``experts.gate_up``
``[E, 2I, hidden]``, gate rows first; ``experts.down`` ``[E, hidden, I]``), so that all experts of a
step run as two grouped products (``torch.nn.functional.grouped_mm``) instead of a Python loop of
products per expert; where this torch has no grouped product for the weights' device and dtype, the
loop over the step's experts computes the same.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import torch
from torch import nn
from torch.nn.functional import linear

from kvgate.workers.model.config import Activation, MoEConfig
from kvgate.workers.model.epilogue import ACTIVATIONS

log = logging.getLogger(__name__)

GroupedMM = Callable[..., torch.Tensor]


def _grouped_mm() -> GroupedMM | None:
    """torch's grouped product ``x[rows of group g] @ w[g]`` (torch 2.9 and later), else None."""
    return getattr(torch.nn.functional, "grouped_mm", None)


class ExpertWeights(nn.Module):
    """The E experts' SwiGLU / GeGLU weights, stacked: ``gate_up [E, 2I, hidden]`` (each expert's gate
    rows, then its up rows) and ``down [E, hidden, I]``. No biases."""

    def __init__(self, hidden: int, moe: MoEConfig, dtype: torch.dtype | None = None) -> None:
        super().__init__()
        experts, inter = moe.num_experts, moe.intermediate_size
        self.gate_up = nn.Parameter(torch.empty(experts, 2 * inter, hidden, dtype=dtype))
        self.down = nn.Parameter(torch.empty(experts, hidden, inter, dtype=dtype))
        nn.init.normal_(self.gate_up, std=hidden**-0.5)
        nn.init.normal_(self.down, std=inter**-0.5)


class SparseMoE(nn.Module):
    """``sum_k w_k * expert_{e_k}(x)`` over the token's ``experts_per_token`` best experts ``e_k``:
    ``w = softmax(router(x))`` over all experts in fp32, the top k kept (renormalised to sum to 1 when
    the config says so). The token copies are grouped by expert once; all experts then run as one
    grouped product per weight (or, without one, each expert on its group)."""

    def __init__(
        self, hidden: int, moe: MoEConfig, act: Activation = "silu", dtype: torch.dtype | None = None
    ) -> None:
        super().__init__()
        self.moe, self.act = moe, ACTIVATIONS[act]
        self.router = nn.Linear(hidden, moe.num_experts, bias=False, dtype=dtype)
        self.experts = ExpertWeights(hidden, moe, dtype)
        self._grouped: GroupedMM | None = _grouped_mm()  # dropped at the first refusal (device, dtype)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x ``[T, hidden]`` -> ``[T, hidden]``."""
        if x.shape[0] == 0:
            return torch.zeros_like(x)
        weights, chosen = self.route(x)  # [T, k] each
        order = chosen.view(-1).argsort(stable=True)  # the (token, slot) pairs grouped by expert
        counts = torch.bincount(chosen.view(-1), minlength=self.moe.num_experts)  # [E]
        tokens = order // chosen.shape[1]  # [T * k]
        y = self.run_experts(x[tokens], counts)  # [T * k, hidden], expert by expert
        y.mul_(weights.view(-1)[order, None])
        return torch.zeros_like(x).index_add_(0, tokens, y)

    def run_experts(self, routed: torch.Tensor, counts: torch.Tensor) -> torch.Tensor:
        """``routed [N, hidden]``, rows grouped by expert (``counts[e]`` rows of expert e, in expert
        order) -> each row through its expert's MLP, ``[N, hidden]`` (a new tensor)."""
        if self._grouped is not None:
            try:
                return self._run_grouped(self._grouped, routed, counts)
            except (RuntimeError, NotImplementedError) as exc:  # no grouped product for this device or dtype
                log.info("experts run one by one on %s %s: %s", routed.device, routed.dtype, exc)
                self._grouped = None
        return self._run_each(routed, counts)

    def _run_grouped(self, grouped_mm: GroupedMM, routed: torch.Tensor, counts: torch.Tensor) -> torch.Tensor:
        offsets = counts.cumsum(0, dtype=torch.int32)  # each expert's rows end here
        gate_up = grouped_mm(routed, self.experts.gate_up.transpose(-2, -1), offs=offsets)  # [N, 2I]
        return grouped_mm(self._glu(gate_up), self.experts.down.transpose(-2, -1), offs=offsets)

    def _run_each(self, routed: torch.Tensor, counts: torch.Tensor) -> torch.Tensor:
        outputs, start = [], 0
        for expert, count in enumerate(counts.tolist()):  # one sync per layer
            if count:
                rows = routed[start : start + count]
                h = self._glu(linear(rows, self.experts.gate_up[expert]))
                outputs.append(linear(h, self.experts.down[expert]))
            start += count
        return torch.cat(outputs)

    def _glu(self, gate_up: torch.Tensor) -> torch.Tensor:
        """``act(gate) * up`` of ``gate_up [N, 2I]`` (gate columns first), in place in its gate half."""
        gate, up = gate_up.chunk(2, dim=-1)
        return self.act(gate).mul_(up)

    def route(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """x ``[T, hidden]`` -> (weights in x's dtype, expert ids), ``[T, experts_per_token]`` each."""
        probs = torch.softmax(self.router(x).float(), dim=-1)  # [T, E]
        weights, chosen = probs.topk(self.moe.experts_per_token, dim=-1)
        if self.moe.renormalize:
            weights = weights / weights.sum(dim=-1, keepdim=True)
        return weights.to(x.dtype), chosen
