"""Tools end to end: the ``openai`` SDK against the real gateway over a real worker serving SmolLM2
(its own tokenizer and chat template; a tool block in the byte-level tiny model would not fit its
context). ``required`` and a named ``tool_choice`` always yield valid calls to declared tools, sampled
at temperature 1 (the grammar holds the model to them), ``parallel_tool_calls: false`` yields exactly
one, calls stream as OpenAI streams them, a two-turn exchange (call, result, answer) works streaming
and not, and an agent's repeated tool block is served from the cache. Then the same over Anthropic's
``/v1/messages``: ``tool_use`` blocks, streamed as ``input_json_delta``, and ``tool_result`` turns."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import jsonschema
import openai
import pytest
import pytest_asyncio

from kvgate.common.clock import SystemClock
from kvgate.common.models import DEFAULT_MODEL_ID
from kvgate.common.tokenizer import load_tokenizer
from kvgate.gateway.compose import build_gateway
from kvgate.gateway.settings import GatewaySettings, Limits
from kvgate.index import IndexSettings, MemoryPrefixIndex
from kvgate.proto.ids import Epoch, WorkerId
from kvgate.proto.layout import CacheLayout
from kvgate.workers.engine import EngineConfig, SchedulingLimits
from kvgate.workers.service import WorkerConfig, WorkerServer
from tests.common.tokenizer.default_model import smollm2_gguf
from tests.support.http_server import serve
from tests.workers.service.helpers import eventually

pytestmark = pytest.mark.asyncio(loop_scope="module")
MODEL = "smollm2"
CACHE = CacheLayout(DEFAULT_MODEL_ID, secret=b"tools-e2e")
LIMITS = Limits(context_window=1024, max_output_tokens=200, request_timeout_s=120)
MAX_OUTPUT = 120  # a call of these tools takes about 25 tokens
WEATHER = {"type": "object", "properties": {"city": {"enum": ["Oslo", "Lima"]}}, "required": ["city"],
           "additionalProperties": False}  # fmt: skip
ADD = {"type": "object", "properties": {"a": {"type": "integer", "minimum": 0, "maximum": 9},
                                        "b": {"type": "integer", "minimum": 0, "maximum": 9}},
       "required": ["a", "b"], "additionalProperties": False}  # fmt: skip
TOOLS: list[Any] = [
    {"type": "function",
     "function": {"name": "weather", "description": "Weather now", "parameters": WEATHER}},
    {"type": "function", "function": {"name": "add", "parameters": ADD}},
]  # fmt: skip
PARAMETERS = {"weather": WEATHER, "add": ADD}
ASK: list[Any] = [{"role": "user", "content": "What is the weather in Oslo?"}]


@dataclass
class Stack:
    client: openai.AsyncOpenAI
    url: str


@pytest.fixture(scope="module")
def smollm2_path() -> Path:
    return smollm2_gguf()


@pytest_asyncio.fixture(scope="module", loop_scope="module")  # one SmolLM2 worker for the module
async def stack(smollm2_path: Path) -> AsyncIterator[Stack]:
    index = MemoryPrefixIndex(IndexSettings(), SystemClock())
    limits = SchedulingLimits(max_num_seqs=4)
    engine = EngineConfig(CACHE, num_gpu_blocks=96, max_model_len=1024, limits=limits)
    worker = WorkerServer(index)
    await worker.start(WorkerConfig(smollm2_path, engine, WorkerId("w0"), Epoch(1), heartbeat_s=0.1,
                                    idle_tick_s=0.2, torch_threads=1, shutdown_grace_s=1.0))  # fmt: skip
    try:
        settings = GatewaySettings(MODEL, CACHE, limits=LIMITS)
        gateway = build_gateway(settings, index, load_tokenizer(smollm2_path), refresh_s=0.1)
        async with serve(gateway.app) as url:
            await eventually(lambda: gateway.dispatcher.routable_count() == 1)
            async with openai.AsyncOpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0) as client:
                yield Stack(client, url)
    finally:
        await worker.stop()


def assert_valid_call(name: str, arguments: str) -> None:
    assert name in PARAMETERS
    jsonschema.validate(json.loads(arguments), PARAMETERS[name])


async def test_required_always_yields_valid_calls_to_declared_tools(stack: Stack) -> None:
    names = set()
    for seed in range(4):
        reply = await stack.client.chat.completions.create(
            model=MODEL, messages=ASK, tools=TOOLS, tool_choice="required", parallel_tool_calls=seed % 2 == 0,
            temperature=1.0, seed=seed, max_tokens=MAX_OUTPUT,
        )  # fmt: skip
        choice = reply.choices[0]
        assert choice.finish_reason == "tool_calls"
        assert choice.message.content is None
        calls = choice.message.tool_calls or []
        assert len(calls) >= 1 if seed % 2 == 0 else len(calls) == 1  # parallel_tool_calls: false -> one
        for call in calls:
            assert call.id.startswith("call_")
            assert_valid_call(call.function.name, call.function.arguments)
            names.add(call.function.name)
    assert names == set(PARAMETERS)  # either tool may be the one called


async def test_a_named_tool_choice_calls_that_tool_once(stack: Stack) -> None:
    reply = await stack.client.chat.completions.create(
        model=MODEL, messages=ASK, tools=TOOLS, tool_choice={"type": "function", "function": {"name": "add"}},
        parallel_tool_calls=False, temperature=1.0, seed=3, max_tokens=MAX_OUTPUT,
    )  # fmt: skip
    assert reply.choices[0].finish_reason == "tool_calls"
    [call] = reply.choices[0].message.tool_calls or []
    assert call.function.name == "add"
    assert_valid_call(call.function.name, call.function.arguments)


async def test_auto_lets_the_model_answer_in_words(stack: Stack) -> None:
    reply = await stack.client.chat.completions.create(
        model=MODEL,
        messages=ASK,
        tools=TOOLS,
        temperature=0,
        max_tokens=12,  # tool_choice: auto
    )
    assert reply.choices[0].message.content  # SmolLM2-135M answers this one in words
    assert reply.choices[0].message.tool_calls is None
    assert reply.choices[0].finish_reason in ("stop", "length")


async def streamed_call(stack: Stack, messages: list[Any], **extra: Any) -> tuple[list[dict], str | None]:
    """The calls of one streamed answer, assembled from their deltas as a client does, and its finish."""
    stream = await stack.client.chat.completions.create(
        model=MODEL, messages=messages, tools=TOOLS, stream=True, max_tokens=MAX_OUTPUT, **extra
    )
    calls: dict[int, dict] = {}
    finish = None
    async for chunk in stream:
        for choice in chunk.choices:
            for delta in choice.delta.tool_calls or []:
                call = calls.setdefault(delta.index, {"id": "", "name": "", "arguments": ""})
                call["id"] += delta.id or ""
                call["name"] += (delta.function.name or "") if delta.function else ""
                call["arguments"] += (delta.function.arguments or "") if delta.function else ""
            finish = choice.finish_reason or finish
    return [calls[i] for i in sorted(calls)], finish


async def test_a_two_turn_exchange_streamed_and_not(stack: Stack) -> None:
    for stream in (False, True):
        if stream:
            calls, finish = await streamed_call(stack, ASK, tool_choice="required", temperature=1.0, seed=9)
        else:
            reply = await stack.client.chat.completions.create(
                model=MODEL, messages=ASK, tools=TOOLS, tool_choice="required", temperature=1.0, seed=9,
                max_tokens=MAX_OUTPUT,
            )  # fmt: skip
            finish = reply.choices[0].finish_reason
            calls = [{"id": c.id, "name": c.function.name, "arguments": c.function.arguments}
                     for c in reply.choices[0].message.tool_calls or []]  # fmt: skip
        assert finish == "tool_calls"
        assert calls
        for call in calls:
            assert_valid_call(call["name"], call["arguments"])
        made = [{"id": c["id"], "type": "function",
                 "function": {"name": c["name"], "arguments": c["arguments"]}} for c in calls]  # fmt: skip
        results = [{"role": "tool", "tool_call_id": c["id"], "content": "4 C, clear"} for c in calls]
        history = [*ASK, {"role": "assistant", "content": None, "tool_calls": made}, *results]
        answer = await stack.client.chat.completions.create(
            model=MODEL, messages=history, tools=TOOLS, tool_choice="none", max_tokens=8, temperature=0
        )  # fmt: skip
        assert answer.choices[0].message.content
        assert answer.choices[0].message.tool_calls is None
        assert answer.choices[0].finish_reason == "length"


async def test_an_agents_repeated_tool_block_is_cached(stack: Stack) -> None:
    fresh = {"cache_salt": "agent-7"}  # a namespace of its own: the earlier tests' blocks are not in it
    first = await stack.client.chat.completions.create(
        model=MODEL, messages=ASK, tools=TOOLS, tool_choice="none", max_tokens=2, extra_body=fresh
    )
    other = [{"role": "user", "content": "And what is 2 + 2?"}]
    second = await stack.client.chat.completions.create(
        model=MODEL, messages=other, tools=TOOLS, tool_choice="none", max_tokens=2, extra_body=fresh
    )
    assert first.usage is not None
    assert second.usage is not None
    assert first.usage.prompt_tokens_details.cached_tokens == 0
    # without its tools the prompt is ~30 tokens: a whole 128-token chunk can only be the tool block
    assert second.usage.prompt_tokens_details.cached_tokens >= 128


ANTHROPIC_TOOLS = [{"name": name, "input_schema": schema} for name, schema in PARAMETERS.items()]
ONE_CALL = {"type": "any", "disable_parallel_tool_use": True}


def sse_events(text: str) -> list[dict]:
    lines = [line for line in text.splitlines() if line.startswith("data: ")]
    return [json.loads(line.removeprefix("data: ")) for line in lines]


def input_fragments(events: list[dict]) -> list[str]:
    deltas = [e["delta"] for e in events if e["type"] == "content_block_delta"]
    return [d["partial_json"] for d in deltas if d["type"] == "input_json_delta"]


async def test_anthropic_tool_use_streamed_and_not_then_a_tool_result(stack: Stack) -> None:
    body = {"model": MODEL, "max_tokens": MAX_OUTPUT, "messages": ASK, "tools": ANTHROPIC_TOOLS,
            "tool_choice": ONE_CALL, "temperature": 1.0}  # fmt: skip
    async with httpx.AsyncClient(base_url=stack.url, timeout=60) as http:
        reply = (await http.post("/v1/messages", json=body)).json()
        streamed = sse_events((await http.post("/v1/messages", json=body | {"stream": True})).text)
        assert reply["stop_reason"] == "tool_use"
        [use] = [b for b in reply["content"] if b["type"] == "tool_use"]
        assert use["id"].startswith("toolu_")
        assert_valid_call(use["name"], json.dumps(use["input"]))
        starts = [e["content_block"] for e in streamed if e["type"] == "content_block_start"]
        [tool] = [b for b in starts if b["type"] == "tool_use"]
        fragments = input_fragments(streamed)
        assert len(fragments) > 1  # the input streams as the model writes it, not whole at the end
        assert_valid_call(tool["name"], "".join(fragments))
        assert [e["delta"]["stop_reason"] for e in streamed if e["type"] == "message_delta"] == ["tool_use"]
        result = [{"type": "tool_result", "tool_use_id": use["id"], "content": "4 C, clear"}]
        history = [*ASK, {"role": "assistant", "content": [use]}, {"role": "user", "content": result}]
        # greedy: a sampled answer may end (end_turn) before its first text token
        then = body | {
            "messages": history,
            "max_tokens": 8,
            "tool_choice": {"type": "none"},
            "temperature": 0,
        }
        answer = (await http.post("/v1/messages", json=then)).json()
    assert answer["stop_reason"] in ("max_tokens", "end_turn")
    assert [b["type"] for b in answer["content"]] == ["text"]
    assert answer["content"][0]["text"]


async def test_arguments_stream_in_fragments_that_concatenate_to_the_plain_calls(stack: Stack) -> None:
    strict = [{"type": "function", "function": t["function"] | {"strict": True}} for t in TOOLS]
    args: dict[str, Any] = {"model": MODEL, "messages": ASK, "tools": strict, "tool_choice": "required",
                            "temperature": 1.0, "seed": 5, "max_tokens": MAX_OUTPUT}  # fmt: skip
    plain = await stack.client.chat.completions.create(**args)
    want = [(c.function.name, c.function.arguments) for c in plain.choices[0].message.tool_calls or []]
    assert want
    stream = await stack.client.chat.completions.create(**args, stream=True)
    deltas = [d async for chunk in stream for choice in chunk.choices for d in choice.delta.tool_calls or []]
    fragments: dict[int, list[str]] = {}
    for delta in deltas:
        assert delta.function is not None
        if delta.index not in fragments:  # a call's first delta: id, type, name, no arguments yet
            assert (delta.id or "").startswith("call_")
            assert (delta.type, delta.function.arguments) == ("function", "")
            fragments[delta.index] = [delta.function.name or ""]
        else:
            assert (delta.id, delta.type, delta.function.name) == (None, None, None)
            fragments[delta.index].append(delta.function.arguments or "")
    assert [(f[0], "".join(f[1:])) for _, f in sorted(fragments.items())] == want
    assert all(len(f) > 3 for f in fragments.values())  # the arguments came in pieces, as generated
    one = args | {"parallel_tool_calls": False}  # one call, then stop: the helper refuses a cut answer
    plain = await stack.client.chat.completions.create(**one)
    want = [(c.function.name, c.function.arguments) for c in plain.choices[0].message.tool_calls or []]
    async with stack.client.chat.completions.stream(**one) as helper:  # the SDK's own accumulation
        final = await helper.get_final_completion()
    calls = final.choices[0].message.tool_calls or []
    assert [(c.function.name, c.function.arguments) for c in calls] == want
    assert [c.function.parsed_arguments for c in calls] == [json.loads(a) for _, a in want]
