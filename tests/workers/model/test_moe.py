"""The sparse feed-forward against its definition: each token through its top-k experts, one at a time,
weighted by the router's probabilities; by grouped products and by the per-expert loop alike."""

from __future__ import annotations

import pytest
import torch
from torch.nn.functional import silu

from kvgate.workers.model.config import MoEConfig
from kvgate.workers.model.moe import SparseMoE

HIDDEN, INTER = 32, 8


def _moe(renormalize: bool, experts: int = 6, top_k: int = 2) -> SparseMoE:
    torch.manual_seed(0)
    moe = SparseMoE(HIDDEN, MoEConfig(experts, top_k, INTER, renormalize), "silu", torch.float32)
    torch.nn.init.normal_(moe.router.weight, std=0.5)
    return moe.eval()


def _definition(moe: SparseMoE, x: torch.Tensor) -> torch.Tensor:
    """Token by token: softmax over every expert, the top k, each chosen expert's SwiGLU MLP."""
    out = torch.zeros_like(x)
    for t in range(x.shape[0]):
        probs = torch.softmax(moe.router.weight @ x[t], dim=-1)
        weights, chosen = probs.topk(moe.moe.experts_per_token)
        if moe.moe.renormalize:
            weights = weights / weights.sum()
        for w, e in zip(weights.tolist(), chosen.tolist(), strict=True):
            gate_up = moe.experts.gate_up[e] @ x[t]
            h = silu(gate_up[:INTER]) * gate_up[INTER:]
            out[t] += w * (moe.experts.down[e] @ h)
    return out


@pytest.mark.parametrize("tokens", [1, 5, 64, 200])
@pytest.mark.parametrize("renormalize", [False, True])
def test_grouped_and_per_expert_runs_equal_the_definition(tokens: int, renormalize: bool) -> None:
    moe = _moe(renormalize)
    x = torch.randn(tokens, HIDDEN, generator=torch.Generator().manual_seed(tokens))
    with torch.inference_mode():
        expected = _definition(moe, x)
        grouped = moe(x)
        moe._grouped = None  # the loop a torch without grouped products runs
        each = moe(x)
    torch.testing.assert_close(grouped, expected, atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(each, expected, atol=1e-5, rtol=1e-4)


def test_experts_no_token_chose_are_skipped() -> None:
    moe = _moe(False, experts=8, top_k=1)
    x = torch.randn(3, HIDDEN, generator=torch.Generator().manual_seed(1))
    with torch.inference_mode():
        _, chosen = moe.route(x)
        assert len(set(chosen.view(-1).tolist())) < 8  # most experts idle in this step
        torch.testing.assert_close(moe(x), _definition(moe, x), atol=1e-5, rtol=1e-4)


def test_a_refused_grouped_product_falls_back_to_the_loop_for_good() -> None:
    moe = _moe(False)
    calls = []

    def refuses(*args: object, **kwargs: object) -> torch.Tensor:
        calls.append(1)
        raise NotImplementedError("no grouped product for this dtype")

    moe._grouped = refuses
    x = torch.randn(7, HIDDEN, generator=torch.Generator().manual_seed(2))
    with torch.inference_mode():
        first, second = moe(x), moe(x)
    torch.testing.assert_close(first, _definition(moe, x), atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(second, first)
    assert calls == [1]  # tried once, then the loop


def test_no_tokens_give_no_rows() -> None:
    moe = _moe(False)
    with torch.inference_mode():
        assert moe(torch.zeros(0, HIDDEN)).shape == (0, HIDDEN)
