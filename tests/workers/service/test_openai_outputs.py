"""The OpenAI sampling outputs end to end: the ``openai`` SDK against the real gateway over a real worker
on the tiny model, checked against the model's own log-softmax (its ``transformers`` load, in fp32):
logprobs and top_logprobs, ``n`` choices of one prefilled prompt, completions batches, ``echo``,
``logit_bias``, and their streaming forms (one choice per chunk, logprobs in the deltas)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import openai
import pytest
import torch

from kvgate.common.clock import SystemClock
from kvgate.common.tokenizer import Tokenizer, load_tokenizer
from kvgate.gateway.settings import Limits
from kvgate.index import IndexSettings, MemoryPrefixIndex
from kvgate.workers.service import WorkerServer
from tests.common.tokenizer.default_model import transformers_module
from tests.support.real_workers import StartWorker
from tests.workers.service.helpers import MAX_MODEL_LEN
from tests.workers.service.openai_front import openai_front

MODEL = "tiny"
LIMITS = Limits(context_window=MAX_MODEL_LEN, max_output_tokens=32, request_timeout_s=30)
MESSAGES = [{"role": "system", "content": "Be brief. " * 8}, {"role": "user", "content": "Count to five."}]


@dataclass
class Stack:
    client: openai.AsyncOpenAI
    tokenizer: Tokenizer
    worker: WorkerServer
    hf: object


@pytest.fixture
async def stack(start_worker: StartWorker, tiny_chat_model: Path) -> AsyncIterator[Stack]:
    transformers = transformers_module()
    hf = transformers.AutoModelForCausalLM.from_pretrained(tiny_chat_model, torch_dtype=torch.float32).eval()
    index = MemoryPrefixIndex(IndexSettings(), SystemClock())
    worker = await start_worker(index)
    tokenizer = load_tokenizer(tiny_chat_model)
    async with openai_front(index, tokenizer, LIMITS, MODEL) as client:
        yield Stack(client, tokenizer, worker, hf)


def chat_ids(stack: Stack) -> list[int]:
    text = stack.tokenizer.apply_chat_template(MESSAGES)
    return stack.tokenizer.encode(text, add_special_tokens=False).tolist()


def log_softmax_after(stack: Stack, ids: list[int]) -> torch.Tensor:
    """``[len(ids), V]``: the model's log-softmax after each token of ``ids``."""
    with torch.inference_mode():
        return torch.log_softmax(stack.hf(torch.tensor([ids])).logits[0].float(), dim=-1)


def text_of(stack: Stack, token_id: int) -> str:
    return stack.tokenizer.decode([token_id], skip_special_tokens=False)


async def test_chat_logprobs_are_the_models_log_softmax(stack: Stack) -> None:
    reply = await stack.client.chat.completions.create(
        model=MODEL, messages=MESSAGES, max_tokens=6, temperature=0, logprobs=True, top_logprobs=3
    )
    content = reply.choices[0].logprobs.content
    assert len(content) == 6
    ids = chat_ids(stack)
    for entry in content:
        row = log_softmax_after(stack, ids)[-1]
        values, best = row.topk(3)
        assert entry.logprob == pytest.approx(values[0].item(), abs=1e-4)  # greedy: the most likely
        assert [t.logprob for t in entry.top_logprobs] == pytest.approx(values.tolist(), abs=1e-4)
        assert [t.token for t in entry.top_logprobs] == [text_of(stack, i) for i in best.tolist()]
        assert entry.bytes == list(entry.token.encode())
        ids.append(best[0].item())


async def test_completion_logprobs_stream_in_the_deltas(stack: Stack) -> None:
    prompt = [5, 80, 81, 82, 90, 100, 101]
    stream = await stack.client.completions.create(model=MODEL, prompt=prompt, max_tokens=5, temperature=0,
                                                   logprobs=2, stream=True)  # fmt: skip
    chunks = [c async for c in stream]
    streamed = [
        lp for c in chunks for lp in (c.choices[0].logprobs.token_logprobs if c.choices[0].logprobs else [])
    ]
    plain = await stack.client.completions.create(model=MODEL, prompt=prompt, max_tokens=5, temperature=0,
                                                  logprobs=2)  # fmt: skip
    expected = log_softmax_after(stack, prompt)[-1].max().item()
    assert plain.choices[0].logprobs.token_logprobs[0] == pytest.approx(expected, abs=1e-4)
    assert streamed == pytest.approx(plain.choices[0].logprobs.token_logprobs, abs=1e-6)
    top = plain.choices[0].logprobs.top_logprobs[0]  # a dict by token text: two tokens may share one
    assert 1 <= len(top) <= 2
    assert max(top.values()) == pytest.approx(expected, abs=1e-4)
    assert plain.choices[0].logprobs.text_offset[0] == 0


async def test_n_choices_share_one_prefilled_prompt(stack: Stack) -> None:
    before = stack.worker.engine.counters()
    reply = await stack.client.chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=4, n=4,
                                                       temperature=1.0, seed=3)  # fmt: skip
    after = stack.worker.engine.counters()
    assert [c.index for c in reply.choices] == [0, 1, 2, 3]
    assert all(c.finish_reason == "length" for c in reply.choices)
    assert reply.usage.prompt_tokens == len(chat_ids(stack))  # counted once
    assert reply.usage.completion_tokens == 16
    assert after.requests - before.requests == 1
    assert after.prompt_tokens - before.prompt_tokens == reply.usage.prompt_tokens  # prefilled once
    assert len({c.message.content for c in reply.choices}) > 1  # each choice draws its own sample


async def test_n_choices_stream_one_choice_per_chunk(stack: Stack) -> None:
    stream = await stack.client.chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=5, n=2,
                                                        temperature=0, logprobs=True, stream=True,
                                                        stream_options={"include_usage": True})  # fmt: skip
    chunks = [c async for c in stream]
    texts, finishes, logprobs = {0: "", 1: ""}, {}, {0: 0, 1: 0}
    for chunk in chunks:
        for choice in chunk.choices:
            assert len(chunk.choices) == 1
            texts[choice.index] += choice.delta.content or ""
            logprobs[choice.index] += len(choice.logprobs.content) if choice.logprobs else 0
            if choice.finish_reason:
                finishes[choice.index] = choice.finish_reason
    plain = await stack.client.chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=5,
                                                       temperature=0)  # fmt: skip
    assert texts == {0: plain.choices[0].message.content, 1: plain.choices[0].message.content}
    assert finishes == {0: "length", 1: "length"}
    assert logprobs == {0: 5, 1: 5}
    assert chunks[-1].usage.completion_tokens == 10


async def test_a_completions_batch_answers_each_prompt(stack: Stack) -> None:
    prompts = ["Once upon a time", "The quick brown fox"]
    batch = await stack.client.completions.create(
        model=MODEL, prompt=prompts, max_tokens=4, temperature=0, n=2
    )
    alone = [await stack.client.completions.create(model=MODEL, prompt=p, max_tokens=4, temperature=0)
             for p in prompts]  # fmt: skip
    assert [c.index for c in batch.choices] == [0, 1, 2, 3]
    assert [c.text for c in batch.choices] == [alone[0].choices[0].text] * 2 + [alone[1].choices[0].text] * 2
    assert batch.usage.prompt_tokens == sum(a.usage.prompt_tokens for a in alone)
    ids = [stack.tokenizer.encode(p, add_special_tokens=False).tolist() for p in prompts]
    by_ids = await stack.client.completions.create(model=MODEL, prompt=ids, max_tokens=4, temperature=0,
                                                   stream=True)  # fmt: skip
    streamed = {0: "", 1: ""}
    async for chunk in by_ids:
        for choice in chunk.choices:
            streamed[choice.index] += choice.text
    assert streamed == {0: alone[0].choices[0].text, 1: alone[1].choices[0].text}


async def test_echo_and_logit_bias(stack: Stack) -> None:
    forced = stack.tokenizer.encode("z", add_special_tokens=False).tolist()[0]
    reply = await stack.client.completions.create(model=MODEL, prompt="Say: ", max_tokens=3, temperature=0.7,
                                                  echo=True, logit_bias={str(forced): 100})  # fmt: skip
    assert reply.choices[0].text == "Say: zzz"


async def test_prompt_logprobs_are_vllms_list_of_the_models_log_softmax(stack: Stack) -> None:
    prompt = [5, 80, 81, 82, 90, 100, 101]
    reply = await stack.client.completions.create(model=MODEL, prompt=prompt, max_tokens=2, temperature=0,
                                                  extra_body={"prompt_logprobs": 2})  # fmt: skip
    scores = reply.choices[0].model_extra["prompt_logprobs"]
    assert reply.choices[0].logprobs is None  # no `logprobs` asked: the prompt's scores stay out of them
    assert len(scores) == len(prompt)
    assert scores[0] is None
    rows = log_softmax_after(stack, prompt)
    for i, entry in enumerate(scores[1:], 1):
        row = rows[i - 1]
        values, best = row.topk(2)
        own = entry[str(prompt[i])]
        assert own["logprob"] == pytest.approx(row[prompt[i]].item(), abs=1e-4)
        assert own["decoded_token"] == text_of(stack, prompt[i])
        for rank, (token, value) in enumerate(zip(best.tolist(), values.tolist(), strict=True), 1):
            assert entry[str(token)]["rank"] == rank
            assert entry[str(token)]["logprob"] == pytest.approx(value, abs=1e-4)
        assert len(entry) in (2, 3)  # the two most likely and the prompt's own token
    both = await stack.client.completions.create(model=MODEL, prompt=prompt, max_tokens=2, temperature=0,
                                                 logprobs=1, extra_body={"prompt_logprobs": 2})  # fmt: skip
    assert len(both.choices[0].logprobs.tokens) == 2  # without `echo`, `logprobs` covers the output alone
    keys = [None if e is None else set(e) for e in both.choices[0].model_extra["prompt_logprobs"]]
    assert keys == [None if e is None else set(e) for e in scores]
    chat = await stack.client.chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=2,
                                                      extra_body={"prompt_logprobs": 0})  # fmt: skip
    ids = chat_ids(stack)
    chat_scores = chat.model_extra["prompt_logprobs"]
    assert len(chat_scores) == len(ids)
    assert chat_scores[0] is None
    last = log_softmax_after(stack, ids)[-2][ids[-1]].item()
    assert chat_scores[-1][str(ids[-1])]["logprob"] == pytest.approx(last, abs=1e-4)


async def test_tokens_as_token_ids(stack: Stack) -> None:
    reply = await stack.client.chat.completions.create(
        model=MODEL, messages=MESSAGES, max_tokens=3, temperature=0, logprobs=True, top_logprobs=2,
        extra_body={"return_tokens_as_token_ids": True},
    )  # fmt: skip
    ids = chat_ids(stack)
    best = log_softmax_after(stack, ids)[-1].topk(2).indices.tolist()
    first = reply.choices[0].logprobs.content[0]
    assert first.token == f"token_id:{best[0]}"
    assert [t.token for t in first.top_logprobs] == [f"token_id:{i}" for i in best]
    stream = await stack.client.completions.create(
        model=MODEL, prompt=[5, 80, 81], max_tokens=2, temperature=0, logprobs=1, stream=True,
        extra_body={"return_tokens_as_token_ids": True},
    )  # fmt: skip
    tokens = [t for c in [c async for c in stream] if c.choices and c.choices[0].logprobs
              for t in c.choices[0].logprobs.tokens]  # fmt: skip
    assert len(tokens) == 2
    assert all(t.startswith("token_id:") for t in tokens)


async def test_a_final_assistant_message_is_continued_and_echoed(stack: Stack) -> None:
    messages = [*MESSAGES, {"role": "assistant", "content": "One, two,"}]
    reply = await stack.client.chat.completions.create(
        model=MODEL, messages=messages, max_tokens=3, temperature=0,  # type: ignore[arg-type]
        extra_body={"continue_final_message": True, "add_generation_prompt": False, "echo": True},
    )  # fmt: skip
    rendered = stack.tokenizer.apply_chat_template(messages, add_generation_prompt=False)
    cut = rendered[: rendered.rindex("One, two,") + len("One, two,")]
    ids = stack.tokenizer.encode(cut, add_special_tokens=False).tolist()
    assert reply.usage.prompt_tokens == len(ids)
    nxt = log_softmax_after(stack, ids)[-1].argmax().item()
    assert reply.choices[0].message.content.startswith("One, two," + text_of(stack, nxt))
    plain = await stack.client.chat.completions.create(
        model=MODEL, messages=MESSAGES, max_tokens=1, extra_body={"add_generation_prompt": False}
    )
    without = stack.tokenizer.apply_chat_template(MESSAGES, add_generation_prompt=False)
    assert plain.usage.prompt_tokens == len(stack.tokenizer.encode(without, add_special_tokens=False))


async def test_truncate_prompt_tokens_keeps_the_last_ones(stack: Stack) -> None:
    prompt = [5, 80, 81, 82, 90, 100, 101]
    reply = await stack.client.completions.create(
        model=MODEL, prompt=prompt, max_tokens=1, temperature=0, echo=True,
        extra_body={"truncate_prompt_tokens": 3},
    )  # fmt: skip
    kept = prompt[-3:]
    assert reply.usage.prompt_tokens == 3
    nxt = log_softmax_after(stack, kept)[-1].argmax().item()
    assert reply.choices[0].text == stack.tokenizer.decode(kept) + text_of(stack, nxt)
