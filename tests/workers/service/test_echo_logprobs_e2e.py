"""Completions' ``echo`` with ``logprobs`` end to end: the ``openai`` SDK against the real gateway over a
real worker on the tiny chat model, checked against the model's own log-softmax (``transformers``,
fp32). The answer's ``logprobs`` cover the prompt's tokens (the first with null) and then the
completion's, in OpenAI's legacy shape, streamed or not; ``max_tokens: 0`` returns the prompt alone."""

from __future__ import annotations

from typing import Any

import pytest

from tests.workers.service.test_openai_outputs import MODEL, Stack, log_softmax_after, stack, text_of

__all__ = ["stack"]  # the fixture, shared with the other OpenAI output tests
PROMPT = "Once upon a time, in a land far away"


def prompt_ids(s: Stack) -> list[int]:
    return s.tokenizer.encode(PROMPT, add_special_tokens=False).tolist()


def assert_prompt_scored(s: Stack, lp: Any, top: int) -> None:
    """``lp``'s first entries are the prompt's tokens with the model's log-softmax (the first: null)."""
    ids = prompt_ids(s)
    rows = log_softmax_after(s, ids)
    assert lp.tokens[: len(ids)] == [text_of(s, i) for i in ids]
    assert lp.token_logprobs[0] is None
    assert lp.top_logprobs[0] is None
    for position in range(len(ids) - 1):
        row, token = rows[position], ids[position + 1]
        assert lp.token_logprobs[position + 1] == pytest.approx(row[token].item(), abs=1e-4)
        found = lp.top_logprobs[position + 1]  # by token text: tokens of one text (a split byte) merge
        assert len(found) <= top
        if top:
            assert max(found.values()) == pytest.approx(row.max().item(), abs=1e-4)


async def test_echo_with_logprobs_scores_the_prompt_then_the_completion(stack: Stack) -> None:
    reply = await stack.client.completions.create(model=MODEL, prompt=PROMPT, max_tokens=4, temperature=0,
                                                  echo=True, logprobs=2)  # fmt: skip
    choice, ids = reply.choices[0], prompt_ids(stack)
    lp = choice.logprobs
    assert len(lp.tokens) == len(ids) + 4 == len(lp.token_logprobs) == len(lp.text_offset)
    assert_prompt_scored(stack, lp, top=2)
    plain = await stack.client.completions.create(model=MODEL, prompt=PROMPT, max_tokens=4, temperature=0,
                                                  logprobs=2)  # fmt: skip
    assert choice.text == PROMPT + plain.choices[0].text
    assert lp.token_logprobs[len(ids) :] == pytest.approx(plain.choices[0].logprobs.token_logprobs, abs=1e-5)
    assert lp.text_offset == [len("".join(lp.tokens[:i])) for i in range(len(lp.tokens))]


async def test_a_streamed_echo_carries_the_same_logprobs(stack: Stack) -> None:
    args: dict[str, Any] = {"model": MODEL, "prompt": PROMPT, "max_tokens": 4, "temperature": 0, "echo": True,
                            "logprobs": 1}  # fmt: skip
    plain = await stack.client.completions.create(**args)
    stream = await stack.client.completions.create(**args, stream=True)
    text, tokens, values, offsets = "", [], [], []
    async for chunk in stream:
        for choice in chunk.choices:
            text += choice.text
            if choice.logprobs:
                tokens += choice.logprobs.tokens
                values += choice.logprobs.token_logprobs
                offsets += choice.logprobs.text_offset
    want = plain.choices[0].logprobs
    assert (text, tokens, offsets) == (plain.choices[0].text, want.tokens, want.text_offset)
    assert values[0] is None
    assert values[1:] == pytest.approx(want.token_logprobs[1:], abs=1e-6)


async def test_max_tokens_zero_returns_the_prompt_alone(stack: Stack) -> None:
    args: dict[str, Any] = {"model": MODEL, "prompt": PROMPT, "max_tokens": 0, "echo": True, "logprobs": 1}
    reply = await stack.client.completions.create(**args)
    choice = reply.choices[0]
    assert (choice.text, choice.finish_reason) == (PROMPT, "length")
    assert len(choice.logprobs.tokens) == len(prompt_ids(stack))
    assert_prompt_scored(stack, choice.logprobs, top=1)
    assert (reply.usage.prompt_tokens, reply.usage.completion_tokens) == (len(prompt_ids(stack)), 0)
    stream = await stack.client.completions.create(**args, stream=True)
    chunks = [c async for c in stream]
    assert "".join(c.choices[0].text for c in chunks) == PROMPT
    assert [c.choices[0].finish_reason for c in chunks][-1] == "length"
    no_logprobs = await stack.client.completions.create(model=MODEL, prompt=PROMPT, max_tokens=0, echo=True)
    assert no_logprobs.choices[0].text == PROMPT
    assert no_logprobs.choices[0].logprobs is None


async def test_every_choice_of_a_batch_echoes_its_own_scored_prompt(stack: Stack) -> None:
    prompts = [PROMPT, "The quick brown fox"]
    reply = await stack.client.completions.create(model=MODEL, prompt=prompts, max_tokens=2, temperature=0,
                                                  n=2, echo=True, logprobs=0)  # fmt: skip
    for choice in reply.choices:
        prompt = prompts[choice.index // 2]
        ids = stack.tokenizer.encode(prompt, add_special_tokens=False).tolist()
        assert choice.text.startswith(prompt)
        assert choice.logprobs.tokens[: len(ids)] == [text_of(stack, i) for i in ids]
        assert choice.logprobs.token_logprobs[0] is None
        assert len(choice.logprobs.tokens) == len(ids) + 2
    assert_prompt_scored(stack, reply.choices[1].logprobs, top=0)


async def test_a_scored_prompt_reuses_no_cache_is_predicted_so_and_leaves_its_blocks_cached(
    stack: Stack,
) -> None:
    long_prompt = "The cache holds blocks of keys and values. " * 6  # over one 128-token chunk
    plain = {"model": MODEL, "prompt": long_prompt, "max_tokens": 1, "temperature": 0}
    await stack.client.completions.create(**plain)
    warm = await stack.client.completions.create(**plain)
    assert warm.usage.prompt_tokens_details.cached_tokens >= 128  # the prefix is cached now
    scored = await stack.client.completions.create(**plain, echo=True, logprobs=1)
    assert scored.usage.prompt_tokens_details.cached_tokens == 0  # computed in full, for its logits
    assert scored.model_extra["kvgate"]["predicted_cached_tokens"] == 0  # and routed knowing it
    ids = stack.tokenizer.encode(long_prompt, add_special_tokens=False).tolist()
    rows = log_softmax_after(stack, ids)
    values = scored.choices[0].logprobs.token_logprobs[1 : len(ids)]
    assert values == pytest.approx([rows[p][ids[p + 1]].item() for p in range(len(ids) - 1)], abs=1e-4)
    again = await stack.client.completions.create(**plain)
    assert again.usage.prompt_tokens_details.cached_tokens >= 128
