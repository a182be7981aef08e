"""Anthropic's tools translated: tool_use / tool_result blocks as conversation turns, tool_choice as
the core's choice (with clear refusals), calls as tool_use blocks, and the stream's content blocks
opened, filled and closed in order around a call, its input streamed in ``input_json_delta`` fragments
that concatenate to the non-streamed ``input`` (read by the official SDK's stream helper too)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from kvgate.gateway.core.call_formats import HERMES, MISTRAL, CallReading
from kvgate.gateway.core.textgen import TextDelta, TextDone
from kvgate.gateway.core.tools import ChoiceMode, ToolCall
from kvgate.gateway.errors import GatewayError
from kvgate.gateway.http_api import anthropic_events
from kvgate.gateway.http_api.anthropic_schemas import MessagesRequest
from kvgate.gateway.http_api.anthropic_tool_events import ToolBlocks
from kvgate.gateway.http_api.anthropic_tools import choice_of, tool_use_json, tools_of, turns
from kvgate.gateway.routing.types import Routed, RouteDecision, RouteReason
from kvgate.proto.ids import WorkerId
from kvgate.proto.sampling import FinishReason, Usage
from tests.support.http_server import serve

ADD = {"name": "add", "input_schema": {"type": "object", "properties": {"a": {"type": "integer"}}}}
USE = {"type": "tool_use", "id": "toolu_1", "name": "add", "input": {"a": 1}}
CALL = '<tool_call>\n{"name": "add", "arguments": {"a": 1}}\n</tool_call>'
ARGUMENTS = '{"a": 1, "b": [2, {"c": null}], "note": "a \\"quoted\\" }"}'  # a brace in a string too
MULTI = f'Adding.\n<tool_call>\n{{"name": "add", "arguments": {ARGUMENTS}}}\n</tool_call>'
READING = CallReading(frozenset({"add"}))  # Hermes alone: arguments stream as they are written
FAMILY = CallReading(frozenset({"add"}), (HERMES, MISTRAL))  # a family format too: calls come whole


def request(**fields: Any) -> MessagesRequest:
    return MessagesRequest.model_validate(
        {"model": "m", "max_tokens": 4, "messages": [{"role": "user", "content": "hi"}]} | fields
    )


def test_tool_use_and_tool_result_blocks_become_turns() -> None:
    body = request(messages=[
        {"role": "user", "content": "add 1"},
        {"role": "assistant", "content": [{"type": "text", "text": "Sure."}, USE]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "2"},
                                     {"type": "text", "text": "thanks"}]},
    ])  # fmt: skip
    rendered = [t for m in body.messages for t in turns(m.role, m.blocks())]
    assert rendered == [
        {"role": "user", "content": "add 1"},
        {"role": "assistant", "content": f"Sure.\n{CALL}"},
        {"role": "user", "content": "<tool_response>\n2\n</tool_response>"},
        {"role": "user", "content": "thanks"},
    ]


def test_tool_choice_maps_to_the_cores_and_refuses_what_cannot_be() -> None:
    tools = tools_of(request(tools=[ADD]))
    assert choice_of(request(tools=[ADD]), tools).mode is ChoiceMode.AUTO
    assert choice_of(request(tool_choice={"type": "any"}), tools).mode is ChoiceMode.REQUIRED
    once = {"type": "tool", "name": "add", "disable_parallel_tool_use": True}
    named = choice_of(request(tool_choice=once), tools)
    assert (named.mode, named.name, named.parallel) == (ChoiceMode.REQUIRED, "add", False)
    with pytest.raises(GatewayError, match="not among `tools`"):
        choice_of(request(tool_choice={"type": "tool", "name": "sub"}), tools)
    with pytest.raises(GatewayError, match="no `tools` are declared"):
        choice_of(request(tool_choice={"type": "any"}), [])
    with pytest.raises(GatewayError, match="twice"):
        tools_of(request(tools=[ADD, ADD]))


def test_a_call_is_a_tool_use_block_with_its_input_parsed() -> None:
    block = tool_use_json(ToolCall("call_abc", "add", '{"a": 1}'))
    assert block == {"type": "tool_use", "id": "toolu_abc", "name": "add", "input": {"a": 1}}


def events_of(chunks: list[bytes]) -> list[tuple[str, dict]]:
    out = []
    for chunk in chunks:
        kind, data = chunk.decode().strip().split("\n")
        out.append((kind.removeprefix("event: "), json.loads(data.removeprefix("data: "))))
    return out


def event(kind: str, payload: dict[str, Any]) -> bytes:
    return f"event: {kind}\ndata: {json.dumps(payload)}\n\n".encode()


def test_streamed_blocks_open_fill_and_close_in_order_around_a_call() -> None:
    blocks = ToolBlocks(READING, event)
    found = events_of([*blocks.text("Let me add. " + CALL[:9]), *blocks.text(CALL[9:] + "\nDone."),
                       *blocks.end()])  # fmt: skip
    assert [(k, e.get("index")) for k, e in found] == [
        ("content_block_delta", 0),  # block 0 (text) was opened with the message
        ("content_block_stop", 0),
        ("content_block_start", 1),
        ("content_block_delta", 1),
        ("content_block_stop", 1),
        ("content_block_start", 2),
        ("content_block_delta", 2),
        ("content_block_stop", 2),
    ]
    assert found[0][1]["delta"] == {"type": "text_delta", "text": "Let me add."}
    assert found[2][1]["content_block"] == {"type": "tool_use", "id": found[2][1]["content_block"]["id"],
                                            "name": "add", "input": {}}  # fmt: skip
    assert found[3][1]["delta"] == {"type": "input_json_delta", "partial_json": '{"a": 1}'}
    assert found[6][1]["delta"] == {"type": "text_delta", "text": "Done."}
    assert blocks.called


def pieces(text: str, size: int) -> list[str]:
    """``text`` as a model streams it, ``size`` characters a token."""
    return [text[i : i + size] for i in range(0, len(text), size)]


def done(reason: FinishReason = FinishReason.STOP) -> TextDone:
    routed = Routed(RouteDecision(WorkerId("w0"), RouteReason.LOAD_BALANCED, 0), None, 1)
    return TextDone(reason, Usage(prompt_tokens=10, completion_tokens=20), routed)


def stream_bytes(
    text: str, size: int, reason: FinishReason = FinishReason.STOP, reading: CallReading = READING
) -> list[bytes]:
    """The whole stream of events for answer ``text``, as the route renders it."""
    render = anthropic_events.renderer("msg_1", "m", None, 10, reading)
    chunks = [c for piece in pieces(text, size) for c in render(TextDelta(piece, ()))]
    return chunks + render(done(reason))


def streamed(
    text: str, size: int, reason: FinishReason = FinishReason.STOP, reading: CallReading = READING
) -> list[tuple[str, dict]]:
    return events_of(stream_bytes(text, size, reason, reading))


def block_starts(found: list[tuple[str, dict]]) -> list[tuple[int, dict]]:
    return [(e["index"], e["content_block"]) for k, e in found if k == "content_block_start"]


def fragments(found: list[tuple[str, dict]], index: int) -> list[str]:
    deltas = [e["delta"] for k, e in found if k == "content_block_delta" and e["index"] == index]
    assert all(d["type"] == "input_json_delta" for d in deltas)
    return [d["partial_json"] for d in deltas]


def whole_input(
    text: str, reason: FinishReason = FinishReason.STOP, reading: CallReading = READING
) -> dict[str, Any]:
    answer = anthropic_events.message("msg_1", "m", text, done(reason), None, reading)
    [use] = [b for b in answer["content"] if b["type"] == "tool_use"]
    return use["input"]


@pytest.mark.parametrize("size", [1, 3, 8])
def test_input_streams_in_fragments_that_concatenate_to_the_whole_answers_input(size: int) -> None:
    found = streamed(MULTI, size)
    [(index, block)] = [(i, b) for i, b in block_starts(found) if b["type"] == "tool_use"]
    assert block == {"type": "tool_use", "id": block["id"], "name": "add", "input": {}}
    parts = fragments(found, index)
    assert len(parts) > 1  # written as the model writes them, not whole at the block's end
    assert "".join(parts) == ARGUMENTS
    assert json.loads("".join(parts)) == whole_input(MULTI) == json.loads(ARGUMENTS)
    kinds = [k for k, e in found if e.get("index") == index]
    assert kinds == ["content_block_start", *["content_block_delta"] * len(parts), "content_block_stop"]
    assert found[-2][1]["delta"]["stop_reason"] == "tool_use"


def test_a_call_cut_off_by_the_token_limit_ends_its_block_with_what_was_written() -> None:
    cut = MULTI[: MULTI.index('"note"') + 9]  # inside the "note" string
    found = streamed(cut, 4, FinishReason.LENGTH)
    [index] = [i for i, b in block_starts(found) if b["type"] == "tool_use"]
    written = "".join(fragments(found, index))
    assert written == ARGUMENTS[: ARGUMENTS.index('"note"') + 9]
    assert whole_input(cut, FinishReason.LENGTH) == {"a": 1, "b": [2, {"c": None}]}  # the cut string left out
    assert [k for k, _ in found[-3:]] == ["content_block_stop", "message_delta", "message_stop"]
    assert found[-2][1]["delta"]["stop_reason"] == "max_tokens"


@pytest.mark.parametrize("text", [MULTI, f'Adding.[TOOL_CALLS][{{"name": "add", "arguments": {ARGUMENTS}}}]'])
def test_with_a_family_format_each_call_streams_whole_once_its_block_is_read(text: str) -> None:
    found = streamed(text, 3, reading=FAMILY)
    [(index, block)] = [(i, b) for i, b in block_starts(found) if b["type"] == "tool_use"]
    assert (block["name"], block["input"]) == ("add", {})
    assert fragments(found, index) == [ARGUMENTS]  # one fragment: the whole input
    assert json.loads(ARGUMENTS) == whole_input(text, reading=FAMILY)
    assert found[-2][1]["delta"]["stop_reason"] == "tool_use"


def test_with_a_family_format_a_cut_off_call_stays_text() -> None:
    cut = MULTI[: MULTI.index('"note"') + 9]
    found = streamed(cut, 4, FinishReason.LENGTH, FAMILY)
    assert [b["type"] for _, b in block_starts(found)] == ["text"]  # block 0 is the only one
    texts = "".join(e["delta"]["text"] for k, e in found if k == "content_block_delta")
    assert texts == "Adding." + cut.removeprefix("Adding.\n")  # the blanks before a block dropped
    answer = anthropic_events.message("msg_1", "m", cut, done(FinishReason.LENGTH), None, FAMILY)
    assert answer["content"] == [{"type": "text", "text": texts}]
    assert found[-2][1]["delta"]["stop_reason"] == answer["stop_reason"] == "max_tokens"


def replaying(body: bytes) -> Any:
    """An ASGI app that answers every request with the server-sent events ``body``."""

    async def app(scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        await receive()
        headers = [(b"content-type", b"text/event-stream")]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    return app


@pytest.mark.parametrize("reason", [FinishReason.STOP, FinishReason.LENGTH])
async def test_the_sdks_stream_helper_accumulates_the_non_streamed_input(reason: FinishReason) -> None:
    anthropic = pytest.importorskip("anthropic")
    text = MULTI if reason is FinishReason.STOP else MULTI[: MULTI.index('"note"') + 9]
    ask = {"model": "m", "max_tokens": 64, "messages": [{"role": "user", "content": "add"}], "tools": [ADD]}
    async with (
        serve(replaying(b"".join(stream_bytes(text, 3, reason)))) as url,
        anthropic.AsyncAnthropic(api_key="unused", base_url=url, max_retries=0) as client,
        client.messages.stream(**ask) as stream,
    ):
        final = await stream.get_final_message()
    [use] = [b for b in final.content if b.type == "tool_use"]
    assert (use.name, use.input) == ("add", whole_input(text, reason))
    assert final.stop_reason == ("tool_use" if reason is FinishReason.STOP else "max_tokens")
