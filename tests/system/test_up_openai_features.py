"""The OpenAI features of issue #21 through a running ``kvgate up`` (a private Ray instance, two worker
actors on the tiny model, the gateway in front), driven with the official ``openai`` SDK: logprobs with
top_logprobs, ``n`` choices of one prompt, a ``json_schema`` response format, ``tool_choice="required"``
and a Responses conversation continued through ``previous_response_id``. The exact values (the model's
log-softmax, every schema, every tool form) are checked in-process in ``tests/workers/service``; here
each feature only has to survive the real processes, so one stack serves the whole module."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import jsonschema
import openai
import pytest

from kvgate.proto.layout import DEFAULT_CHUNK_SIZE
from tests.system.test_up import TINY, chat
from tests.system.up_process import READY_S, UpProcess, wait_for

pytestmark = [pytest.mark.slow, pytest.mark.ray]

MODEL = "tiny"
CITY = {"type": "object", "properties": {"city": {"enum": ["Oslo", "Lima"]}}, "required": ["city"],
        "additionalProperties": False}  # fmt: skip
DESK = "You are the help desk of a library; answer in one short sentence. " * 4  # no other test's prefix
TOOLS: list[Any] = [
    {"type": "function", "function": {"name": "weather", "description": "Weather now", "parameters": CITY}}
]


@pytest.fixture(scope="module")
def client(tiny_chat_model: Path) -> Iterator[openai.OpenAI]:
    """One ``kvgate up`` for the module, stopped with Ctrl-C at the end (a clean exit is asserted by
    ``test_up.py``; here a stuck one is only killed)."""
    process = UpProcess(["--model", str(tiny_chat_model), "--model-name", MODEL, *TINY])
    try:
        process.wait_healthy(timeout_s=READY_S)
        with openai.OpenAI(base_url=f"{process.base_url}/v1", api_key="unused", max_retries=0) as sdk:
            yield sdk
        process.interrupt()
    finally:
        if process.proc.poll() is None:
            process.kill()


def test_logprobs_and_top_logprobs(client: openai.OpenAI) -> None:
    reply = client.chat.completions.create(
        model=MODEL, messages=chat("Count to five."), max_tokens=4, temperature=0, logprobs=True,
        top_logprobs=3,
    )  # fmt: skip
    tokens = reply.choices[0].logprobs.content
    assert len(tokens) == 4
    for token in tokens:
        top = [t.logprob for t in token.top_logprobs]
        assert len(top) == 3
        assert all(math.isfinite(p) and p <= 0 for p in [token.logprob, *top])
        assert top == sorted(top, reverse=True)
        assert token.logprob == pytest.approx(top[0])  # greedy: the chosen token is the likeliest
        assert token.token in [t.token for t in token.top_logprobs]


def test_n_choices_count_the_prompt_once(client: openai.OpenAI) -> None:
    single = client.chat.completions.create(model=MODEL, messages=chat("Name a colour."), max_tokens=3)
    four = client.chat.completions.create(
        model=MODEL, messages=chat("Name a colour."), max_tokens=3, n=4, temperature=1.0, seed=7
    )
    assert sorted(c.index for c in four.choices) == [0, 1, 2, 3]
    assert four.usage.prompt_tokens == single.usage.prompt_tokens
    assert four.usage.completion_tokens == 4 * 3  # the tiny model has no EOS: each runs to max_tokens


def test_a_json_schema_response_format_validates(client: openai.OpenAI) -> None:
    schema = {"type": "json_schema", "json_schema": {"name": "city", "schema": CITY, "strict": True}}
    reply = client.chat.completions.create(
        model=MODEL, messages=chat("Which city? Answer as JSON."), max_tokens=60, temperature=0,
        response_format=schema,  # type: ignore[arg-type]
    )  # fmt: skip
    assert reply.choices[0].finish_reason == "stop", reply.choices[0].message.content
    jsonschema.validate(json.loads(reply.choices[0].message.content or ""), CITY)


def test_tool_choice_required_calls_a_declared_tool(client: openai.OpenAI) -> None:
    ask: list[Any] = [{"role": "user", "content": "Weather in Oslo?"}]  # the tools' prompt is long: no system
    reply = client.chat.completions.create(
        model=MODEL, messages=ask, tools=TOOLS, tool_choice="required",
        max_tokens=80, temperature=0,
    )  # fmt: skip
    choice = reply.choices[0]
    assert choice.finish_reason == "tool_calls", choice.message
    (call,) = choice.message.tool_calls or []
    assert call.function.name == "weather"
    jsonschema.validate(json.loads(call.function.arguments), CITY)


def test_a_continued_response_reads_the_first_turn_from_the_cache(client: openai.OpenAI) -> None:
    first = client.responses.create(model=MODEL, instructions=DESK, input="When?", max_output_tokens=4)
    # the worker's events reach the gateway's index through its feed: wait until a dry run of a
    # request with the same instructions lands where the first turn was cached
    route = f"{client.base_url}route"
    desk = [{"role": "system", "content": DESK}, {"role": "user", "content": "?"}]
    probe = {"model": MODEL, "messages": desk}
    wait_for(lambda: httpx.post(route, json=probe, timeout=10).json()["reason"] == "cache_hit", timeout_s=30)
    second = client.responses.create(
        model=MODEL, instructions=DESK, input="Then?", previous_response_id=first.id, max_output_tokens=4
    )
    assert first.usage is not None
    assert second.usage is not None
    assert second.usage.input_tokens > first.usage.input_tokens  # the first turn, answer included
    whole_chunks = first.usage.input_tokens // DEFAULT_CHUNK_SIZE * DEFAULT_CHUNK_SIZE
    assert whole_chunks >= DEFAULT_CHUNK_SIZE
    assert second.usage.input_tokens_details.cached_tokens >= whole_chunks
