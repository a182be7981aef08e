"""The wire shapes of streamed tool calls, fed a call token by token: chat's ``tool_calls`` deltas (the
first with index, id, type, name and empty arguments; then index and argument fragments only) and the
Responses API's ``function_call`` item events (added, argument deltas, done), both concatenating to
the arguments the whole answer reads."""

from __future__ import annotations

import json
from typing import Any

from kvgate.gateway.core.call_formats import CallReading
from kvgate.gateway.core.call_stream import split_streamed
from kvgate.gateway.http_api.openai_tool_stream import ToolDeltas
from kvgate.gateway.http_api.responses_items import OutputItems

NAMES = {"get_weather", "add"}
TEXT = ('Checking. <tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris", "days": [1, 2]}}\n'
        '</tool_call>\n<tool_call>\n{"name": "add", "arguments": {"a": 1}}\n</tool_call>')  # fmt: skip


def pieces(text: str, size: int = 3) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


def events(chunks: list[bytes]) -> list[dict[str, Any]]:
    return [json.loads(c.decode().removeprefix("data: ").strip()) for c in chunks]


def test_chat_deltas_start_each_call_then_stream_its_arguments() -> None:
    deltas = ToolDeltas("chatcmpl-1", "m", CallReading(frozenset(NAMES)))
    chunks = [c for piece in pieces(TEXT) for c in events(deltas.text(0, piece, None))]
    chunks += events(deltas.end(0, "stop"))
    calls = [d for c in chunks for d in c["choices"][0]["delta"].get("tool_calls", [])]
    firsts = [d for d in calls if "id" in d]
    assert [(d["index"], d["type"], d["function"]) for d in firsts] == [
        (0, "function", {"name": "get_weather", "arguments": ""}),
        (1, "function", {"name": "add", "arguments": ""}),
    ]
    rest = [d for d in calls if "id" not in d]
    assert all(set(d) == {"index", "function"} and set(d["function"]) == {"arguments"} for d in rest)
    assert len(rest) > 10  # fragments as the text came, not one per call
    joined = ["".join(d["function"]["arguments"] for d in rest if d["index"] == i) for i in (0, 1)]
    assert joined == [c.arguments for c in split_streamed(TEXT, NAMES)[1]]
    assert joined[0] == '{"city": "Paris", "days": [1, 2]}'
    content = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks)
    assert content == "Checking."
    assert chunks[-1]["choices"][0]["finish_reason"] == "tool_calls"


def test_responses_events_add_each_call_stream_its_arguments_and_finish_it() -> None:
    output = OutputItems(CallReading(frozenset(NAMES)))
    found = [e for piece in pieces(TEXT) for e in output.text(piece)] + output.finish(True)
    kinds = [e["type"] for e in found]
    added = [e["item"] for e in found if e["type"] == "response.output_item.added"]
    assert [(i["type"], i.get("arguments")) for i in added] == [("message", None), ("function_call", ""),
                                                               ("function_call", "")]  # fmt: skip
    done = [e for e in found if e["type"] == "response.function_call_arguments.done"]
    for event in done:
        mine = [e for e in found if e.get("item_id") == event["item_id"]]
        deltas = [e["delta"] for e in mine if e["type"] == "response.function_call_arguments.delta"]
        assert len(deltas) > 1
        assert "".join(deltas) == event["arguments"]
    assert [e["arguments"] for e in done] == ['{"city": "Paris", "days": [1, 2]}', '{"a": 1}']
    assert kinds.index("response.output_text.done") < kinds.index("response.function_call_arguments.delta")
    assert [i["status"] for i in output.items] == ["completed"] * 3
