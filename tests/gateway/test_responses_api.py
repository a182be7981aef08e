"""``/v1/responses`` over the real gateway and scripted workers, with the official ``openai`` SDK: the
response object and its usage, the stream's events in OpenAI's order ending with the same response,
conversations continued through ``previous_response_id`` (the earlier turns in the prompt, cached on
the worker that served them), stored responses per tenant, and OpenAI-style refusals."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import openai
import pytest

from kvgate.common.tokenizer import Tokenizer
from kvgate.gateway.tenancy import KeyRing, Tenant, hash_key
from tests.support.live_gateway import MODEL, LiveGateway, running_gateway
from tests.support.scripted_worker import Mode

INSTRUCTIONS = "You answer questions about the kvgate handbook, briefly and exactly. " * 30  # ~400 tokens
KEYS = {"acme": "kvg-acme-key", "beta": "kvg-beta-key"}


@pytest.fixture
async def sdk(live: LiveGateway) -> AsyncIterator[openai.AsyncOpenAI]:
    async with openai.AsyncOpenAI(base_url=f"{live.url}/v1", api_key="unused", max_retries=0) as client:
        yield client


def comparable(response: dict[str, Any]) -> dict[str, Any]:
    """A response without what differs between two answers of one request: ids, times, the cache
    and the worker."""
    out = {
        k: v for k, v in response.items() if k not in ("id", "created_at", "completed_at", "usage", "kvgate")
    }
    out["output"] = [{k: v for k, v in item.items() if k != "id"} for item in response["output"]]
    return out


def rendered_tokens(tokenizer: Tokenizer, messages: list[dict[str, str]]) -> int:
    return len(tokenizer.encode(tokenizer.apply_chat_template(messages), add_special_tokens=False))


async def test_a_response_has_openai_shape_text_and_usage(
    sdk: openai.AsyncOpenAI, live: LiveGateway, tokenizer: Tokenizer
) -> None:
    reply = await sdk.responses.create(model=MODEL, input="What is a chunk?", max_output_tokens=5)
    assert reply.id.startswith("resp_")
    assert reply.object == "response"
    # scripted workers always run to the token limit
    assert reply.status == "incomplete"
    assert reply.incomplete_details is not None
    assert reply.incomplete_details.reason == "max_output_tokens"
    [message] = reply.output
    assert (message.type, message.role) == ("message", "assistant")
    assert message.content[0].type == "output_text"
    assert reply.output_text == message.content[0].text != ""
    usage = reply.usage
    assert usage is not None
    assert usage.input_tokens == rendered_tokens(tokenizer, [{"role": "user", "content": "What is a chunk?"}])
    assert usage.output_tokens == 5
    assert usage.total_tokens == usage.input_tokens + 5
    assert usage.input_tokens_details.cached_tokens == 0
    assert usage.output_tokens_details.reasoning_tokens == 0
    assert (reply.store, reply.previous_response_id, reply.tools) == (True, None, [])
    assert (await sdk.responses.retrieve(reply.id)).model_dump() == reply.model_dump()


async def test_the_stream_sends_openai_events_in_order_and_ends_with_the_response(
    sdk: openai.AsyncOpenAI,
) -> None:
    stream = await sdk.responses.create(model=MODEL, input="Stream please.", max_output_tokens=4, stream=True)
    events = [event async for event in stream]
    kinds = [e.type for e in events]
    assert kinds[:5] == ["response.created", "response.in_progress", "response.output_item.added",
                         "response.content_part.added", "response.output_text.delta"]  # fmt: skip
    assert kinds[-4:] == ["response.output_text.done", "response.content_part.done",
                          "response.output_item.done", "response.incomplete"]  # fmt: skip
    assert set(kinds[4:-4]) == {"response.output_text.delta"}
    assert [e.sequence_number for e in events] == list(range(len(events)))
    assert (events[0].response.status, events[0].response.output) == ("in_progress", [])
    final = events[-1].response
    deltas = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    assert final.output_text == deltas == events[-4].text
    assert final.usage is not None
    assert final.usage.output_tokens == 4
    stored = await sdk.responses.retrieve(final.id)
    assert stored.model_dump() == final.model_dump()
    plain = await sdk.responses.create(model=MODEL, input="Stream please.", max_output_tokens=4)
    assert comparable(plain.model_dump()) == comparable(final.model_dump())
    assert plain.output_text == final.output_text  # scripted workers answer a prompt the same way


async def test_previous_response_id_continues_the_conversation_from_the_cache(
    sdk: openai.AsyncOpenAI, tokenizer: Tokenizer
) -> None:
    first = await sdk.responses.create(model=MODEL, instructions=INSTRUCTIONS, input="What is a chunk?",
                                       max_output_tokens=6)  # fmt: skip
    second = await sdk.responses.create(model=MODEL, instructions=INSTRUCTIONS, input="And a block?",
                                        previous_response_id=first.id, max_output_tokens=6)  # fmt: skip
    conversation = [
        {"role": "system", "content": INSTRUCTIONS},
        {"role": "user", "content": "What is a chunk?"},
        {"role": "assistant", "content": first.output_text},
        {"role": "user", "content": "And a block?"},
    ]
    assert first.usage is not None
    assert second.usage is not None
    assert second.usage.input_tokens == rendered_tokens(tokenizer, conversation)  # the earlier turn, in full
    assert second.previous_response_id == first.id
    whole_chunks = first.usage.input_tokens // 128 * 128
    assert whole_chunks >= 256
    assert second.usage.input_tokens_details.cached_tokens >= whole_chunks
    third = await sdk.responses.create(model=MODEL, input="And an epoch?", previous_response_id=second.id,
                                       max_output_tokens=2)  # fmt: skip
    assert third.usage is not None
    later = [*conversation[1:], {"role": "assistant", "content": second.output_text},
             {"role": "user", "content": "And an epoch?"}]  # fmt: skip
    assert third.usage.input_tokens == rendered_tokens(tokenizer, later)  # instructions do not carry over


async def test_store_false_and_deleted_responses_cannot_be_continued(sdk: openai.AsyncOpenAI) -> None:
    unstored = await sdk.responses.create(model=MODEL, input="Forget me.", max_output_tokens=2, store=False)
    assert unstored.store is False
    with pytest.raises(openai.NotFoundError):
        await sdk.responses.retrieve(unstored.id)
    kept = await sdk.responses.create(model=MODEL, input="Keep me.", max_output_tokens=2)
    await sdk.responses.delete(kept.id)
    with pytest.raises(openai.NotFoundError) as gone:
        await sdk.responses.create(
            model=MODEL, input="Again", previous_response_id=kept.id, max_output_tokens=2
        )
    assert gone.value.body["param"] == "previous_response_id"  # type: ignore[index]
    with pytest.raises(openai.NotFoundError):
        await sdk.responses.delete(kept.id)


async def test_another_tenant_cannot_see_continue_or_delete_a_response(tokenizer: Tokenizer) -> None:
    ring = KeyRing([(hash_key(key), Tenant(name)) for name, key in KEYS.items()])
    async with running_gateway(tokenizer, keys=ring) as live:
        clients = {name: openai.AsyncOpenAI(base_url=f"{live.url}/v1", api_key=key, max_retries=0)
                   for name, key in KEYS.items()}  # fmt: skip
        try:
            mine = await clients["acme"].responses.create(
                model=MODEL, input="Secret plans.", max_output_tokens=2
            )
            for attempt in (
                clients["beta"].responses.retrieve(mine.id),
                clients["beta"].responses.delete(mine.id),
                clients["beta"].responses.create(model=MODEL, input="Tell me", previous_response_id=mine.id,
                                                 max_output_tokens=2),
            ):  # fmt: skip
                with pytest.raises(openai.NotFoundError) as refused:
                    await attempt
                assert "Secret" not in str(refused.value.body)
            assert (await clients["acme"].responses.retrieve(mine.id)).id == mine.id
            on = await clients["acme"].responses.create(
                model=MODEL, input="Go on", previous_response_id=mine.id, max_output_tokens=2
            )
            assert on.previous_response_id == mine.id
        finally:
            for client in clients.values():
                await client.close()


BAD: list[tuple[dict[str, Any], int, str | None, str]] = [
    ({"input": "x"}, 400, "model", "Missing required parameter: 'model'"),
    ({"model": MODEL}, 400, "input", "Missing required parameter: 'input'"),
    ({"model": MODEL, "input": 3}, 400, "input", "Invalid type for 'input'"),
    ({"model": MODEL, "input": []}, 400, "input", "must not be an empty list"),
    ({"model": MODEL, "input": [{"role": "bot", "content": "x"}]}, 400, "input.0.role", "Invalid value"),
    ({"model": MODEL, "input": [{"role": "user", "content": [{"type": "input_image", "image_url": "u"}]}]},
     400, "input.0.content.0", "`input_image` content is not supported"),
    ({"model": MODEL, "input": [{"type": "reasoning", "id": "r", "summary": []}]}, 400, "input.0",
     "input items of type `reasoning` are not supported"),
    ({"model": MODEL, "input": "x", "max_output_tokens": "5"}, 400, "max_output_tokens",
     "expected an integer"),
    ({"model": MODEL, "input": "x", "tools": [{"type": "web_search"}]}, 400, "tools.0", "`web_search` tools"),
    ({"model": MODEL, "input": "x", "tool_choice": "required"}, 400, "tool_choice",
     "no `tools` are declared"),
    ({"model": MODEL, "input": "x", "background": True}, 400, "background", "not supported"),
    ({"model": MODEL, "input": "x", "previous_response_id": "resp_nope"}, 404, "previous_response_id",
     "No response with id 'resp_nope' found."),
    ({"model": "other", "input": "x"}, 404, "model", "does not exist"),
    ({"model": MODEL, "input": "word " * 5000}, 400, "input", "maximum context length"),
    ({"model": MODEL, "input": "x", "max_output_tokens": 100_000}, 400, "max_output_tokens",
     "max_output_tokens is 100000, but at most 512 fit"),
    ({"model": MODEL, "input": [{"type": "function_call", "call_id": "c", "name": "f", "arguments": "[1]"}]},
     400, "input.0", "must be a JSON object"),
    ({"model": MODEL, "input": "x", "text": {"format": {"type": "json_schema", "name": "s",
                                                       "schema": {"type": "object", "not": {}}}}},
     400, "text.format", "schema"),
]  # fmt: skip


@pytest.mark.parametrize(("body", "status", "param", "words"), BAD)
async def test_bad_requests_get_openai_style_errors(
    live: LiveGateway, body: dict[str, Any], status: int, param: str | None, words: str
) -> None:
    async with httpx.AsyncClient(base_url=live.url) as http:
        reply = await http.post("/v1/responses", json=body)
    assert reply.status_code == status, reply.text
    error = reply.json()["error"]
    assert error["type"] == "invalid_request_error"
    assert error["param"] == param
    assert words in error["message"]


async def test_unknown_ids_are_404_on_get_and_delete(live: LiveGateway) -> None:
    async with httpx.AsyncClient(base_url=live.url) as http:
        for reply in (await http.get("/v1/responses/resp_x"), await http.delete("/v1/responses/resp_x")):
            assert reply.status_code == 404
            assert reply.json()["error"] == {"message": "No response with id 'resp_x' found.",
                                             "type": "invalid_request_error", "param": "response_id",
                                             "code": "response_not_found"}  # fmt: skip


async def test_input_items_render_as_the_same_chat_completion_would(live: LiveGateway) -> None:
    """A stateless tool exchange (an earlier call and its output sent back as items) makes the prompt
    the equivalent chat messages make: tools, call and result rendered alike."""
    weather = {"type": "object", "properties": {"city": {"type": "string"}}}
    items = [
        {"role": "developer", "content": "Be brief."},
        {"role": "user", "content": [{"type": "input_text", "text": "Weather in Oslo?"}]},
        {"type": "function_call", "call_id": "call_1", "name": "weather", "arguments": '{"city": "Oslo"}'},
        {"type": "function_call_output", "call_id": "call_1", "output": "4 C, clear"},
    ]
    messages = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Weather in Oslo?"},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "call_1", "type": "function",
            "function": {"name": "weather", "arguments": '{"city": "Oslo"}'}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "4 C, clear"},
    ]  # fmt: skip
    async with httpx.AsyncClient(base_url=live.url) as http:
        tools = [{"type": "function", "name": "weather", "parameters": weather}]
        reply = await http.post("/v1/responses", json={"model": MODEL, "input": items, "tools": tools,
                                                       "max_output_tokens": 2})  # fmt: skip
        chat_tools = [{"type": "function", "function": {"name": "weather", "parameters": weather}}]
        chat_body = {"model": MODEL, "messages": messages, "tools": chat_tools, "max_tokens": 2}
        chat = await http.post("/v1/chat/completions", json=chat_body)
    assert reply.status_code == 200, reply.text
    assert reply.json()["usage"]["input_tokens"] == chat.json()["usage"]["prompt_tokens"]
    assert reply.json()["tools"] == [{"type": "function", "name": "weather", "description": None,
                                      "parameters": weather, "strict": None}]  # fmt: skip


async def test_a_failure_mid_stream_ends_the_stream_with_an_error_event(live: LiveGateway) -> None:
    for worker in live.workers:
        worker.mode = Mode.FAIL_AFTER_TWO
    body = {"model": MODEL, "input": "hi", "stream": True, "max_output_tokens": 8}
    async with (
        httpx.AsyncClient(base_url=live.url, timeout=10) as http,
        http.stream("POST", "/v1/responses", json=body) as response,
    ):
        assert response.status_code == 200  # the failure comes after the first tokens
        lines = [line async for line in response.aiter_lines() if line]
    data = [json.loads(line.removeprefix("data: ")) for line in lines if line.startswith("data: ")]
    assert lines[-2] == "event: error"
    assert data[-1]["type"] == "error"
    assert data[-1]["sequence_number"] == data[-2]["sequence_number"] + 1
    assert set(data[-1]) == {"type", "code", "message", "param", "sequence_number"}
    assert "engine crashed" not in data[-1]["message"]  # the worker's own words stay in the log
    assert not any(d["type"].startswith("response.complete") for d in data)
    assert "data: [DONE]" not in lines
