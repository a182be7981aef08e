"""The proof: SmolLM2-135M-Instruct (GGUF, Q4_1 dequantised) run by kvgate's decoder over the paged
reference kernels generates exactly the greedy tokens of ``transformers`` on the same file, alone, in a
batch of different lengths, and from a prefix whose K/V another sequence computed."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch

from kvgate.common.tokenizer import Tokenizer
from kvgate.workers.model import DecoderModel, ScheduledSequence, build_step
from tests.workers.model.conftest import NEW_TOKENS
from tests.workers.model.harness import PagedRunner

pytestmark = pytest.mark.slow

QUESTIONS = [
    "What is the capital of France?",
    "Write a short poem about the sea.",
    "Explain in two sentences why the sky is blue.",
    "List three fruits that are red, with one sentence about each 🍓.",
]
SYSTEM = (
    "You are a careful assistant for a travel agency. Answer briefly and politely. The agency offers "
    "trips to Lisbon, Kyoto, Nairobi and Quito; prices start at 900 euros; every trip includes a guide."
)


@pytest.mark.parametrize("question", QUESTIONS)
def test_greedy_tokens_equal_transformers(
    smollm2: DecoderModel, chat_prompt: Callable[..., list[int]], hf_greedy: Callable, question: str
) -> None:
    prompt = chat_prompt(question)
    runner = PagedRunner(smollm2, num_blocks=32)
    seq = runner.start(prompt)
    runner.generate([seq], NEW_TOKENS, smollm2.config.eos_token_ids)
    assert seq.generated == hf_greedy(prompt)


def test_batched_prefill_and_decode_equal_transformers(
    smollm2: DecoderModel, chat_prompt: Callable[..., list[int]], hf_greedy: Callable
) -> None:
    prompts = [chat_prompt(q) for q in QUESTIONS]
    assert len({len(p) for p in prompts}) == len(prompts)  # all lengths differ
    runner = PagedRunner(smollm2, num_blocks=64)
    seqs = [runner.start(p) for p in prompts]
    runner.generate(seqs, NEW_TOKENS, smollm2.config.eos_token_ids)  # one prefill, then batched decode
    assert [s.generated for s in seqs] == [hf_greedy(p) for p in prompts]


def test_cached_prefix_then_suffix_prefill_equals_transformers(
    smollm2: DecoderModel, chat_prompt: Callable[..., list[int]], hf_greedy: Callable
) -> None:
    first, second = chat_prompt("Which city is in Japan?", SYSTEM), chat_prompt("How much is Quito?", SYSTEM)
    runner = PagedRunner(smollm2, num_blocks=64)
    earlier = runner.start(first)
    runner.generate([earlier], NEW_TOKENS, smollm2.config.eos_token_ids)

    later = runner.start(second, prefix_of=earlier)  # shares earlier's full blocks of the common prefix
    assert later.num_cached >= 3 * runner.block_size
    assert later.block_table == earlier.block_table[: later.num_cached // runner.block_size]
    runner.generate([later], NEW_TOKENS, smollm2.config.eos_token_ids)  # prefills only the suffix
    assert later.generated == hf_greedy(second)
    assert earlier.generated == hf_greedy(first)


def test_prompt_logits_are_close_to_transformers_at_every_position(
    smollm2: DecoderModel, hf_smollm2: Any, chat_prompt: Callable[..., list[int]]
) -> None:
    prompt = chat_prompt(QUESTIONS[0])
    runner = PagedRunner(smollm2, num_blocks=32)
    blocks = list(range(-(-len(prompt) // runner.block_size)))
    every_row = ScheduledSequence(blocks, 0, len(prompt), all_logits=True)
    step = build_step([every_row], runner.block_size, "cpu")
    with torch.inference_mode():
        ours = smollm2(torch.tensor(prompt), step.positions, step.attn, runner.caches)  # [T, vocab]
        theirs = hf_smollm2(torch.tensor([prompt])).logits[0]  # [T, vocab]
    torch.testing.assert_close(ours, theirs, atol=2e-3, rtol=1e-3)


def test_the_answer_reads_as_text(
    smollm2: DecoderModel, tokenizer: Tokenizer, chat_prompt: Callable[..., list[int]]
) -> None:
    runner = PagedRunner(smollm2, num_blocks=32)
    seq = runner.start(chat_prompt(QUESTIONS[0]))
    runner.generate([seq], NEW_TOKENS, tokenizer.eos_token_ids)
    assert "Paris" in tokenizer.decode(seq.generated, skip_special_tokens=True)
