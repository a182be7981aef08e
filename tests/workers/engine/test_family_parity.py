"""Every model family through the engine (not a harness) against ``transformers`` on the same tiny
random weights (fp32, safetensors, blocks of 4 tokens): the prompt's last-position logits and the
greedy tokens agree, for a cold prompt and for a prompt whose 24-token prefix is a prefix-cache hit.
The sliding-window families use an 8-token window, so the hit's reused blocks straddle the window."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
import torch

from kvgate.kernels import get_kernels
from kvgate.workers.engine import LLMEngine, run_to_completion
from kvgate.workers.model import DecoderModel, load_model
from tests.common.tokenizer.default_model import transformers_module
from tests.workers.engine.helpers import assert_no_leak, engine_for, random_ids, request
from tests.workers.model.tiny import FAMILY_VARIANTS, save_tiny_model

N = 12  # new tokens per request
PREFIX = random_ids(24, seed=200)  # 6 full blocks shared by A and B
A = [*PREFIX, 3, *random_ids(5, seed=201)]  # 30 tokens
B = [*PREFIX, 4, *random_ids(7, seed=202)]  # 32 tokens: differs from A right after the prefix
TOL = {"atol": 2e-5, "rtol": 1e-4}

Pair = tuple[Any, DecoderModel]  # (transformers' model, ours)


BACKENDS = ("reference", "sdpa")  # the specification and the engine's fast path


@pytest.fixture(scope="module", params=[(v, k) for v in FAMILY_VARIANTS for k in BACKENDS], ids=str)
def pair(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Pair:
    variant, kernels = request.param
    transformers_module()
    folder: Path = tmp_path_factory.mktemp(variant)
    hf = save_tiny_model(variant, folder)
    return hf, load_model(folder, get_kernels(kernels), device="cpu")


def _hf(hf: Any, prompt: Sequence[int]) -> tuple[torch.Tensor, list[int]]:
    """``transformers``' last-position logits of ``prompt`` and its greedy continuation of N tokens."""
    ids = torch.tensor([list(prompt)])
    with torch.inference_mode():
        logits = hf(ids).logits[0, -1]
        out = hf.generate(ids, do_sample=False, max_new_tokens=N, min_new_tokens=N)
    return logits, out[0, len(prompt) :].tolist()


@pytest.fixture
def engine(pair: Pair) -> Iterator[tuple[LLMEngine, list[torch.Tensor]]]:
    """A fresh engine over our model, and the logits of every step it runs (a spy on the runner)."""
    engine = engine_for(pair[1], gpu_blocks=48)
    recorded: list[torch.Tensor] = []
    forward: Callable[..., torch.Tensor] = engine.runner.forward

    def recording(*args: Any) -> torch.Tensor:
        logits = forward(*args)
        recorded.append(logits.clone())
        return logits

    engine.runner.forward = recording  # type: ignore[method-assign]
    yield engine, recorded
    assert_no_leak(engine)


def test_cold_prompt(pair: Pair, engine: tuple[LLMEngine, list[torch.Tensor]]) -> None:
    run, recorded = engine
    done = run_to_completion(run, [request("a", A)])["a"]
    logits, tokens = _hf(pair[0], A)
    assert done.usage.cached_tokens == 0
    torch.testing.assert_close(recorded[0][0], logits, **TOL)  # the prefill step's one row: A's last
    assert list(done.token_ids) == tokens


def test_prefix_cache_hit(pair: Pair, engine: tuple[LLMEngine, list[torch.Tensor]]) -> None:
    run, recorded = engine
    run_to_completion(run, [request("a", A)])
    recorded.clear()
    done = run_to_completion(run, [request("b", B)])["b"]
    logits, tokens = _hf(pair[0], B)
    assert done.usage.cached_gpu_tokens == 24  # the 6 prefix blocks, computed for A
    torch.testing.assert_close(recorded[0][0], logits, **TOL)  # B's suffix only was computed
    assert list(done.token_ids) == tokens
