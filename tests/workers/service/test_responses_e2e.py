"""The Responses API end to end: the official ``openai`` SDK against the real gateway over a real
worker serving SmolLM2 (its own tokenizer and chat template). A response and its usage, the stream's
events in OpenAI's order ending with the response a plain call returns, a conversation continued
through ``previous_response_id`` whose second turn reuses the first turn's KV blocks, responses kept
per tenant, and function tools: a required call valid against its schema, its output sent back."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import jsonschema
import openai
import pytest
import pytest_asyncio

from kvgate.common.clock import SystemClock
from kvgate.common.models import DEFAULT_MODEL_ID
from kvgate.common.tokenizer import Tokenizer, load_tokenizer
from kvgate.gateway.compose import build_gateway
from kvgate.gateway.settings import GatewaySettings, Limits
from kvgate.gateway.tenancy import KeyRing, Tenant, hash_key
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
CACHE = CacheLayout(DEFAULT_MODEL_ID, secret=b"responses-e2e")
LIMITS = Limits(context_window=1024, max_output_tokens=200, request_timeout_s=120)
KEYS = {"acme": "kvg-acme-key", "beta": "kvg-beta-key"}
INSTRUCTIONS = ("You are the help desk of a library. Answer in one short sentence, politely, and only "
                "about the library: its opening hours, its loans and its reading rooms. ") * 8  # fmt: skip
WEATHER = {"type": "object", "properties": {"city": {"enum": ["Oslo", "Lima"]}}, "required": ["city"],
           "additionalProperties": False}  # fmt: skip
TOOLS: list[Any] = [
    {"type": "function", "name": "weather", "description": "Weather now", "parameters": WEATHER}
]


@dataclass
class Stack:
    clients: dict[str, openai.AsyncOpenAI]
    tokenizer: Tokenizer

    @property
    def client(self) -> openai.AsyncOpenAI:
        return self.clients["acme"]


@pytest_asyncio.fixture(scope="module", loop_scope="module")  # one SmolLM2 worker for the module
async def stack() -> AsyncIterator[Stack]:
    path = smollm2_gguf()
    index = MemoryPrefixIndex(IndexSettings(), SystemClock())
    engine = EngineConfig(
        CACHE, num_gpu_blocks=96, max_model_len=1024, limits=SchedulingLimits(max_num_seqs=4)
    )
    worker = WorkerServer(index)
    await worker.start(WorkerConfig(path, engine, WorkerId("w0"), Epoch(1), heartbeat_s=0.1, idle_tick_s=0.2,
                                    torch_threads=1, shutdown_grace_s=1.0))  # fmt: skip
    try:
        ring = KeyRing([(hash_key(key), Tenant(name)) for name, key in KEYS.items()])
        tokenizer = load_tokenizer(path)
        gateway = build_gateway(
            GatewaySettings(MODEL, CACHE, limits=LIMITS, keys=ring), index, tokenizer, 0.1
        )
        async with serve(gateway.app) as url:
            await eventually(lambda: gateway.dispatcher.routable_count() == 1)
            clients = {name: openai.AsyncOpenAI(base_url=f"{url}/v1", api_key=key, max_retries=0)
                       for name, key in KEYS.items()}  # fmt: skip
            yield Stack(clients, tokenizer)
            for client in clients.values():
                await client.close()
    finally:
        await worker.stop()


def prompt_tokens(stack: Stack, messages: list[dict[str, str]]) -> int:
    text = stack.tokenizer.apply_chat_template(messages, add_generation_prompt=True)
    return len(stack.tokenizer.encode(text, add_special_tokens=False))


async def test_a_response_carries_its_text_and_usage(stack: Stack) -> None:
    reply = await stack.client.responses.create(
        model=MODEL, input="Say hello.", max_output_tokens=6, temperature=0
    )
    assert reply.status in ("completed", "incomplete")
    assert reply.output_text.strip()
    assert reply.usage is not None
    assert reply.usage.input_tokens == prompt_tokens(stack, [{"role": "user", "content": "Say hello."}])
    assert 0 < reply.usage.output_tokens <= 6
    assert reply.usage.total_tokens == reply.usage.input_tokens + reply.usage.output_tokens


async def test_the_stream_arrives_in_openai_order_and_ends_with_the_plain_response(stack: Stack) -> None:
    ask = {"model": MODEL, "input": "Name a colour.", "max_output_tokens": 5, "temperature": 0}
    async with stack.client.responses.stream(**ask) as stream:
        events = [event async for event in stream]
    kinds = [event.type for event in events]
    final = events[-1].response  # type: ignore[union-attr]  # completed, or incomplete at the token limit
    plain = await stack.client.responses.create(**ask)
    closing = ["response.output_text.done", "response.content_part.done", "response.output_item.done"]
    assert kinds[:4] == ["response.created", "response.in_progress", "response.output_item.added",
                         "response.content_part.added"]  # fmt: skip
    assert kinds[-4:] == [*closing, f"response.{final.status}"]
    assert set(kinds[4:-4]) == {"response.output_text.delta"}
    assert final.output_text == plain.output_text  # greedy: the same words, streamed or not
    assert final.usage is not None
    assert plain.usage is not None
    assert (final.usage.input_tokens, final.usage.output_tokens) == (
        plain.usage.input_tokens,
        plain.usage.output_tokens,
    )
    assert [(i.type, i.status) for i in final.output] == [(i.type, i.status) for i in plain.output]
    assert final.model_dump().keys() == plain.model_dump().keys()


async def test_a_continued_conversation_reuses_the_first_turn_from_the_cache(stack: Stack) -> None:
    first = await stack.client.responses.create(model=MODEL, instructions=INSTRUCTIONS, temperature=0,
                                                input="When do you open?", max_output_tokens=8)  # fmt: skip
    second = await stack.client.responses.create(model=MODEL, instructions=INSTRUCTIONS, temperature=0,
                                                 input="And on Sundays?", previous_response_id=first.id,
                                                 max_output_tokens=8)  # fmt: skip
    assert first.usage is not None
    assert second.usage is not None
    whole_chunks = first.usage.input_tokens // CACHE.chunk_size * CACHE.chunk_size
    assert whole_chunks >= 2 * CACHE.chunk_size
    assert second.usage.input_tokens_details.cached_tokens >= whole_chunks
    conversation = [
        {"role": "system", "content": INSTRUCTIONS},
        {"role": "user", "content": "When do you open?"},
        {"role": "assistant", "content": first.output_text},
        {"role": "user", "content": "And on Sundays?"},
    ]
    assert second.usage.input_tokens == prompt_tokens(stack, conversation)  # the first turn, answer included
    assert second.output_text.strip()


async def test_another_tenant_cannot_read_or_continue_a_response(stack: Stack) -> None:
    mine = await stack.client.responses.create(model=MODEL, input="Hi", max_output_tokens=2)
    with pytest.raises(openai.NotFoundError):
        await stack.clients["beta"].responses.retrieve(mine.id)
    with pytest.raises(openai.NotFoundError) as refused:
        await stack.clients["beta"].responses.create(model=MODEL, input="Go on", previous_response_id=mine.id,
                                                     max_output_tokens=2)  # fmt: skip
    assert refused.value.body["param"] == "previous_response_id"  # type: ignore[index]
    assert (await stack.client.responses.retrieve(mine.id)).output_text == mine.output_text


async def test_a_required_function_call_then_its_output_in_the_next_turn(stack: Stack) -> None:
    ask: dict[str, Any] = {"model": MODEL, "input": "What is the weather in Oslo?", "tools": TOOLS,
                           "tool_choice": "required", "parallel_tool_calls": False, "temperature": 1.0,
                           "max_output_tokens": 60, "extra_body": {"seed": 5}}  # fmt: skip
    plain = await stack.client.responses.create(**ask)
    for stream in (False, True):
        if stream:
            async with stack.client.responses.stream(**ask) as events:
                seen = [event async for event in events]
                call_reply = await events.get_final_response()  # a call ends its response: completed
            deltas = [e.delta for e in seen if e.type == "response.function_call_arguments.delta"]
            [done] = [e for e in seen if e.type == "response.function_call_arguments.done"]
            assert len(deltas) > 3  # the arguments streamed as they were written
            assert "".join(deltas) == done.arguments == plain.output[0].arguments  # type: ignore[union-attr]
        else:
            call_reply = plain
        [call] = call_reply.output
        assert call.type == "function_call"
        assert call.name == "weather"
        assert call.call_id.startswith("call_")
        jsonschema.validate(json.loads(call.arguments), WEATHER)
        result = [{"type": "function_call_output", "call_id": call.call_id, "output": "4 C, clear"}]
        answer = await stack.client.responses.create(
            model=MODEL, input=result, previous_response_id=call_reply.id, tools=TOOLS, tool_choice="none",
            temperature=0, max_output_tokens=6,
        )  # fmt: skip
        assert [item.type for item in answer.output] == ["message"]
        assert answer.output_text.strip()
        assert answer.usage is not None
        assert answer.usage.input_tokens_details.cached_tokens >= CACHE.chunk_size  # the tool block, at least


async def test_a_json_schema_text_format_constrains_the_output(stack: Stack) -> None:
    properties = {"city": {"enum": ["Oslo", "Lima"]}, "rain": {"type": "boolean"}}
    schema = {
        "type": "object",
        "properties": properties,
        "required": ["city", "rain"],
        "additionalProperties": False,
    }
    reply = await stack.client.responses.create(
        model=MODEL, input="Is it raining in Lima?", temperature=1.0, max_output_tokens=40,
        text={"format": {"type": "json_schema", "name": "weather", "schema": schema, "strict": True}},
    )  # fmt: skip
    assert reply.status == "completed"
    jsonschema.validate(json.loads(reply.output_text), schema)
    assert reply.text is not None
    assert reply.text.format.type == "json_schema"
