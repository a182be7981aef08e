"""Anthropic's tools translated: tool_use / tool_result blocks as conversation turns, tool_choice as
the core's choice (with clear refusals), calls as tool_use blocks, and the stream's content blocks
opened, filled and closed in order around a call."""

from __future__ import annotations

import json
from typing import Any

import pytest

from kvgate.gateway.core.call_formats import CallReading
from kvgate.gateway.core.tools import ChoiceMode, ToolCall
from kvgate.gateway.errors import GatewayError
from kvgate.gateway.http_api.anthropic_schemas import MessagesRequest
from kvgate.gateway.http_api.anthropic_tool_events import ToolBlocks
from kvgate.gateway.http_api.anthropic_tools import choice_of, tool_use_json, tools_of, turns

ADD = {"name": "add", "input_schema": {"type": "object", "properties": {"a": {"type": "integer"}}}}
USE = {"type": "tool_use", "id": "toolu_1", "name": "add", "input": {"a": 1}}
CALL = '<tool_call>\n{"name": "add", "arguments": {"a": 1}}\n</tool_call>'


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
    blocks = ToolBlocks(CallReading(frozenset({"add"})), event)
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
