"""A sparse feed-forward (mixture of experts): each token goes through its top-k of E gated MLPs."""

from __future__ import annotations

import torch
from torch import nn

from kvgate.workers.model.config import Activation, MoEConfig
from kvgate.workers.model.layers import GatedMLP


class SparseMoE(nn.Module):
    """``sum_k w_k * expert_{e_k}(x)`` over the token's ``experts_per_token`` best experts ``e_k``:
    ``w = softmax(router(x))`` over all experts in fp32, the top k kept (renormalised to sum to 1 when
    the config says so). The token copies are grouped by expert once; each expert runs on its group."""

    def __init__(
        self, hidden: int, moe: MoEConfig, act: Activation = "silu", dtype: torch.dtype | None = None
    ) -> None:
        super().__init__()
        self.moe = moe
        self.router = nn.Linear(hidden, moe.num_experts, bias=False, dtype=dtype)
        self.experts = nn.ModuleList(
            GatedMLP(hidden, moe.intermediate_size, False, act, dtype) for _ in range(moe.num_experts)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x ``[T, hidden]`` -> ``[T, hidden]``."""
        if x.shape[0] == 0:
            return torch.zeros_like(x)
        weights, chosen = self.route(x)  # [T, k] each
        order = chosen.view(-1).argsort(stable=True)  # the (token, slot) pairs grouped by expert
        counts = torch.bincount(chosen.view(-1), minlength=len(self.experts)).tolist()  # one sync per layer
        tokens = order // chosen.shape[1]  # [T * k]
        routed = x[tokens]  # [T * k, hidden], expert by expert
        outputs, start = [], 0
        for expert, count in enumerate(counts):
            if count:
                outputs.append(self.experts[expert](routed[start : start + count]))
            start += count
        y = torch.cat(outputs).mul_(weights.view(-1)[order, None])  # [T * k, hidden]
        return torch.zeros_like(x).index_add_(0, tokens, y)

    def route(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """x ``[T, hidden]`` -> (weights in x's dtype, expert ids), ``[T, experts_per_token]`` each."""
        probs = torch.softmax(self.router(x).float(), dim=-1)  # [T, E]
        weights, chosen = probs.topk(self.moe.experts_per_token, dim=-1)
        if self.moe.renormalize:
            weights = weights / weights.sum(dim=-1, keepdim=True)
        return weights.to(x.dtype), chosen
