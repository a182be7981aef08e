"""The engine's fast path (the SDPA kernels, its default) against the reference kernels (the
specification) on SmolLM2-135M-Instruct: in fp32 the engine's greedy tokens are the same on the parity
prompts (alone, batched, and over prefixes cached by earlier requests); in bf16 both paths stay within
the documented tolerance of the fp32 reference (docs/ENGINE.md): prompt logits within 1.0 (max abs),
and the same next token as the bf16 reference."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import torch

from kvgate.common.models import DEFAULT_MODEL_ID
from kvgate.common.tokenizer import Tokenizer
from kvgate.kernels import get_kernels
from kvgate.proto.layout import CacheLayout
from kvgate.workers.engine import run_to_completion
from kvgate.workers.model import DecoderModel, ScheduledSequence, build_step, load_model
from kvgate.workers.model.gemm import GEMMS, STANDARD
from kvgate.workers.model.gemm_tuning import install, plan_for
from tests.workers.engine.helpers import assert_no_leak, engine_for, greedy, request
from tests.workers.model.conftest import NEW_TOKENS
from tests.workers.model.harness import PagedRunner
from tests.workers.model.test_smollm2_parity import QUESTIONS, SYSTEM

pytestmark = pytest.mark.slow

CACHE = CacheLayout(DEFAULT_MODEL_ID, secret=b"test")
BF16_LOGIT_TOLERANCE = 1.0  # max |logit - fp32 reference logit| at the prompt's last position
Chat = Callable[..., list[int]]


def _prompts(chat_prompt: Chat) -> list[list[int]]:
    return [chat_prompt(q) for q in QUESTIONS] + [chat_prompt(q, SYSTEM) for q in QUESTIONS]


def _greedy_tokens(model: DecoderModel, tokenizer: Tokenizer, prompts: list[list[int]]) -> list[list[int]]:
    """The engine's greedy tokens: the first prompt alone, then all of them in one batch (the system-prompt
    ones reuse the blocks their batch-mates and the first request cached)."""
    engine = engine_for(model, gpu_blocks=160, cache=CACHE, tokenizer=tokenizer)
    run_to_completion(engine, [request("warm", prompts[-1], greedy(NEW_TOKENS))])
    done = run_to_completion(engine, [request(f"r{i}", p, greedy(NEW_TOKENS)) for i, p in enumerate(prompts)])
    assert done[f"r{len(prompts) - 1}"].usage.cached_tokens > 0
    assert_no_leak(engine)
    return [list(done[f"r{i}"].token_ids) for i in range(len(prompts))]


@pytest.fixture(scope="module")
def reference_tokens(
    smollm2_reference: DecoderModel, tokenizer: Tokenizer, chat_prompt: Chat
) -> list[list[int]]:
    assert smollm2_reference.layers[0].attn.kernels.name == "reference"
    return _greedy_tokens(smollm2_reference, tokenizer, _prompts(chat_prompt))


def test_fp32_greedy_tokens_equal_the_reference_kernels(
    smollm2: DecoderModel, reference_tokens: list[list[int]], tokenizer: Tokenizer, chat_prompt: Chat
) -> None:
    assert smollm2.layers[0].attn.kernels.name == "sdpa"
    assert _greedy_tokens(smollm2, tokenizer, _prompts(chat_prompt)) == reference_tokens


@pytest.mark.parametrize("form", sorted(set(GEMMS) - {"linear"}))
def test_fp32_greedy_tokens_hold_under_every_gemm_form(
    form: str,
    smollm2: DecoderModel,
    reference_tokens: list[list[int]],
    tokenizer: Tokenizer,
    chat_prompt: Chat,
) -> None:
    """Decode steps of 1 and of 2-31 rows run every projection and the output head through ``form``."""
    install(smollm2, plan_for(smollm2, form))
    try:
        assert _greedy_tokens(smollm2, tokenizer, _prompts(chat_prompt)) == reference_tokens
    finally:
        install(smollm2, STANDARD)


@pytest.fixture(scope="module")
def bf16_models(smollm2_path: Path) -> dict[str, DecoderModel]:
    return {name: load_model(smollm2_path, get_kernels(name), device="cpu", dtype=torch.bfloat16)
            for name in ("reference", "sdpa")}  # fmt: skip


def _last_logits(model: DecoderModel, prompt: list[int]) -> torch.Tensor:
    """``model``'s fp32 logits ``[vocab]`` at the prompt's last position (one cold prefill)."""
    runner = PagedRunner(model, num_blocks=32)
    step = build_step([ScheduledSequence(list(range(32)), 0, len(prompt))], runner.block_size, "cpu")
    with torch.inference_mode():
        return model(torch.tensor(prompt), step.positions, step.attn, runner.caches)[0].float()


def test_bf16_stays_within_the_documented_tolerance(
    smollm2_reference: DecoderModel, bf16_models: dict[str, DecoderModel], chat_prompt: Chat
) -> None:
    for prompt in _prompts(chat_prompt):
        exact = _last_logits(smollm2_reference, prompt)
        ours = {name: _last_logits(model, prompt) for name, model in bf16_models.items()}
        for logits in ours.values():
            assert (logits - exact).abs().max() <= BF16_LOGIT_TOLERANCE
        assert ours["sdpa"].argmax() == ours["reference"].argmax()
