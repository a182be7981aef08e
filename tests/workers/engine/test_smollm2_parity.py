"""The key proof: SmolLM2-135M-Instruct served by the ENGINE (scheduler, paged KV tiers, prefix cache,
sampler) generates exactly the greedy tokens of ``transformers.generate`` on the same GGUF file, cold,
with a prefix served from the GPU tier, with one served from the CPU tier, and batched."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from kvgate.common.models import DEFAULT_MODEL_ID
from kvgate.common.tokenizer import Tokenizer
from kvgate.proto.layout import CacheLayout
from kvgate.workers.engine import LLMEngine, run_to_completion
from kvgate.workers.model import DecoderModel
from tests.workers.engine.helpers import assert_no_leak, engine_for, greedy, request
from tests.workers.model.conftest import NEW_TOKENS
from tests.workers.model.test_smollm2_parity import QUESTIONS, SYSTEM

pytestmark = pytest.mark.slow

CACHE = CacheLayout(DEFAULT_MODEL_ID, secret=b"test")  # blocks of 16 tokens, chunks of 128
Chat = Callable[..., list[int]]
Greedy = Callable[[list[int]], list[int]]


def _engine(model: DecoderModel, tokenizer: Tokenizer, gpu_blocks: int, cpu_blocks: int = 0) -> LLMEngine:
    return engine_for(model, gpu_blocks=gpu_blocks, cpu_blocks=cpu_blocks, cache=CACHE, tokenizer=tokenizer)


def _shared_blocks(a: list[int], b: list[int]) -> int:
    """Tokens in the full 16-token blocks that ``a`` and ``b`` share (what a prefix hit reuses)."""
    n = 0
    while n < min(len(a), len(b) - 1) and a[n] == b[n]:
        n += 1
    return n // 16 * 16


@pytest.mark.parametrize("question", QUESTIONS[:2])
def test_cold(
    smollm2: DecoderModel, tokenizer: Tokenizer, chat_prompt: Chat, hf_greedy: Greedy, question: str
) -> None:
    prompt = chat_prompt(question)
    engine = _engine(smollm2, tokenizer, gpu_blocks=32)
    done = run_to_completion(engine, [request("r", prompt, greedy(NEW_TOKENS))])["r"]
    assert list(done.token_ids) == hf_greedy(prompt)
    assert done.usage.cached_tokens == 0
    assert_no_leak(engine)


def test_prefix_from_the_gpu_tier(smollm2: DecoderModel, tokenizer: Tokenizer, chat_prompt: Chat,
                                  hf_greedy: Greedy) -> None:  # fmt: skip
    first, second = chat_prompt("Which city is in Japan?", SYSTEM), chat_prompt("How much is Quito?", SYSTEM)
    engine = _engine(smollm2, tokenizer, gpu_blocks=32)
    done = run_to_completion(engine, [request("a", first, greedy(NEW_TOKENS))])["a"]
    assert list(done.token_ids) == hf_greedy(first)
    done = run_to_completion(engine, [request("b", second, greedy(NEW_TOKENS))])["b"]
    assert done.usage.cached_gpu_tokens == _shared_blocks(first, second) >= 48
    assert done.usage.cached_cpu_tokens == 0
    assert list(done.token_ids) == hf_greedy(second)
    assert_no_leak(engine)


def test_prefix_from_the_cpu_tier(smollm2: DecoderModel, tokenizer: Tokenizer, chat_prompt: Chat,
                                  hf_greedy: Greedy) -> None:  # fmt: skip
    first, second = chat_prompt("Which city is in Japan?", SYSTEM), chat_prompt("How much is Lisbon?", SYSTEM)
    engine = _engine(smollm2, tokenizer, gpu_blocks=16, cpu_blocks=32)  # 256 GPU slots
    run_to_completion(engine, [request("a", first, greedy(1))])
    # A 255-token filler needs every GPU block: all of the first prompt's cached blocks move to the CPU.
    filler = tokenizer.encode("The quick brown fox jumps over the lazy dog. " * 40)[:255].tolist()
    run_to_completion(engine, [request("filler", filler, greedy(1))])
    assert engine.kv_counters().offloaded == len(first) // 16
    done = run_to_completion(engine, [request("b", second, greedy(NEW_TOKENS))])["b"]
    assert done.usage.cached_cpu_tokens == _shared_blocks(first, second) >= 48
    assert done.usage.cached_gpu_tokens == 0
    assert list(done.token_ids) == hf_greedy(second)
    assert_no_leak(engine)


def test_batch_of_different_lengths(smollm2: DecoderModel, tokenizer: Tokenizer, chat_prompt: Chat,
                                    hf_greedy: Greedy) -> None:  # fmt: skip
    prompts = [chat_prompt(q) for q in QUESTIONS]
    assert len({len(p) for p in prompts}) == len(prompts)
    engine = _engine(smollm2, tokenizer, gpu_blocks=64)
    done = run_to_completion(engine, [request(f"r{i}", p, greedy(NEW_TOKENS)) for i, p in enumerate(prompts)])
    assert [list(done[f"r{i}"].token_ids) for i in range(len(prompts))] == [hf_greedy(p) for p in prompts]
    assert_no_leak(engine)
