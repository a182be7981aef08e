"""The output items of a response, built from its text as it streams: text before a call is a message
closed when the call completes, each call a ``function_call`` item; the events tell the same story as
the items, whatever the pieces the text arrives in."""

from __future__ import annotations

import json

from kvgate.gateway.core.call_formats import CallReading
from kvgate.gateway.http_api.responses_items import OutputItems

CALL = '<tool_call>\n{"name": "weather", "arguments": {"city": "Oslo"}}\n</tool_call>'
ANSWER = f"Let me look.\n{CALL}\nThen: {CALL}"


def built(
    pieces: list[str], tools: frozenset[str] | None = frozenset({"weather"})
) -> tuple[OutputItems, list]:
    output = OutputItems(None if tools is None else CallReading(tools))
    events = [e for piece in pieces for e in output.text(piece)] + output.finish(complete=True)
    return output, events


def test_text_then_calls_make_a_message_and_two_function_call_items() -> None:
    output, events = built([ANSWER[i : i + 5] for i in range(0, len(ANSWER), 5)])  # five characters at a time
    assert [(i["type"], i["status"]) for i in output.items] == [
        ("message", "completed"), ("function_call", "completed"), ("message", "completed"),
        ("function_call", "completed"),
    ]  # fmt: skip
    assert output.items[0]["content"][0]["text"] == "Let me look."
    assert output.items[2]["content"][0]["text"] == "Then:"
    assert [json.loads(i["arguments"]) for i in output.items[1::2]] == [{"city": "Oslo"}] * 2
    assert output.items[1]["call_id"] != output.items[3]["call_id"]
    done = [e["item"] for e in events if e["type"] == "response.output_item.done"]
    assert done == output.items  # the events end with the items the answer has
    added = [e["output_index"] for e in events if e["type"] == "response.output_item.added"]
    assert added == [0, 1, 2, 3]
    deltas = "".join(e["delta"] for e in events if e["type"] == "response.output_text.delta")
    assert deltas == "Let me look.Then:"


def test_without_tools_a_call_is_text_and_the_answer_one_message() -> None:
    output, events = built([ANSWER], tools=None)
    [message] = output.items
    assert message["content"][0]["text"] == ANSWER
    kinds = [e["type"] for e in events]
    opened = ["response.output_item.added", "response.content_part.added", "response.output_text.delta"]
    closed = ["response.output_text.done", "response.content_part.done", "response.output_item.done"]
    assert kinds == opened + closed


def test_an_empty_answer_is_one_empty_message_and_a_cut_one_is_incomplete() -> None:
    output = OutputItems(None)
    output.finish(complete=False)
    assert [(i["type"], i["status"], i["content"][0]["text"]) for i in output.items] == [
        ("message", "incomplete", "")
    ]


def test_the_turn_a_continuation_renders_keeps_texts_and_calls_in_order() -> None:
    output, _ = built([ANSWER])
    turn = output.turn()
    assert turn["role"] == "assistant"
    assert turn["content"] == f"Let me look.\n{CALL}\nThen:\n{CALL}"  # as written, blanks around calls aside
