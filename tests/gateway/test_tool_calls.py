"""Tool calls read back from text, whole and streamed in pieces of every size: content and calls in
order, blocks that are not calls left as written, tags split across pieces, blanks around calls."""

from __future__ import annotations

import json

import pytest

from kvgate.gateway.core.tool_calls import CallScanner, split_calls
from kvgate.gateway.core.tools import (
    ChoiceMode,
    Tool,
    ToolCall,
    ToolChoice,
    assistant_turn,
    call_constraint,
    render_conversation,
    tool_result_turn,
)

NAMES = {"get_weather", "add"}
WEATHER = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'
ADD = '<tool_call>\n{"name": "add", "arguments": {"a": 1, "b": 2}}\n</tool_call>'


def calls_of(pieces: list) -> list[tuple[str, dict]]:
    return [(p.name, json.loads(p.arguments)) for p in pieces if isinstance(p, ToolCall)]


def test_a_whole_answer_splits_into_content_and_calls() -> None:
    content, calls = split_calls(f"Let me check.\n{WEATHER}\n{ADD}\n", NAMES)
    assert content == "Let me check."
    assert [(c.name, json.loads(c.arguments)) for c in calls] == [("get_weather", {"city": "Paris"}),
                                                                  ("add", {"a": 1, "b": 2})]  # fmt: skip
    assert all(c.id.startswith("call_") and len(c.id) == 29 for c in calls)
    assert len({c.id for c in calls}) == 2


def test_only_calls_means_no_content_and_no_calls_means_the_text_as_written() -> None:
    assert split_calls(WEATHER, NAMES)[0] is None
    assert split_calls("plain answer \n", NAMES) == ("plain answer \n", [])


@pytest.mark.parametrize("block", [
    '<tool_call>\n{"name": "launch", "arguments": {}}\n</tool_call>',  # not declared
    "<tool_call>\nnot json\n</tool_call>",
    '<tool_call>\n{"name": "add", "arguments": [1]}\n</tool_call>',  # arguments not an object
    '<tool_call>\n{"name": "add", "arguments": {"a": 1}',  # cut off by the end
])  # fmt: skip
def test_a_block_that_is_not_a_call_stays_content(block: str) -> None:
    content, calls = split_calls(f"x {block}", NAMES)
    assert calls == []
    assert content is not None
    assert block.strip() in content


@pytest.mark.parametrize("size", [1, 2, 3, 7, 11, 1000])
def test_streamed_in_pieces_of_any_size_it_reads_the_same(size: int) -> None:
    text = f"Sure: {WEATHER}\n{ADD}"
    scanner = CallScanner(NAMES)
    pieces = [p for i in range(0, len(text), size) for p in scanner.feed(text[i : i + size])]
    pieces += scanner.finish()
    assert "".join(p for p in pieces if isinstance(p, str)) == "Sure:"
    assert calls_of(pieces) == [("get_weather", {"city": "Paris"}), ("add", {"a": 1, "b": 2})]
    assert all("<" not in p for p in pieces if isinstance(p, str))  # no piece of a tag leaked as text


def test_text_that_only_looks_like_a_tag_start_is_released() -> None:
    scanner = CallScanner(NAMES)
    assert scanner.feed("a <tool") == ["a"]  # held: it may open a call
    assert scanner.feed("box> b") == [" <toolbox> b"]
    assert scanner.finish() == []


TOOLS = [Tool("get_weather", "Weather now", {"type": "object", "properties": {"city": {"type": "string"}}}),
         Tool("add")]  # fmt: skip


def test_declarations_lead_the_prompt_in_the_system_message() -> None:
    with_system = render_conversation([{"role": "system", "content": "Be brief."},
                                       {"role": "user", "content": "hi"}], TOOLS)  # fmt: skip
    assert with_system[0]["content"].startswith("Be brief.\n\n# Tools")
    assert '{"name":"get_weather","description":"Weather now"' in with_system[0]["content"]
    without = render_conversation([{"role": "user", "content": "hi"}], TOOLS)
    assert [m["role"] for m in without] == ["system", "user"]
    assert render_conversation([{"role": "user", "content": "hi"}], []) == [{"role": "user", "content": "hi"}]


def test_earlier_calls_and_results_are_written_as_the_model_writes_them() -> None:
    turn = assistant_turn("", [ToolCall("call_1", "get_weather", '{"city": "Paris"}')])
    assert turn == {"role": "assistant", "content": WEATHER}
    assert split_calls(turn["content"], NAMES)[1][0].name == "get_weather"  # it reads back as a call
    assert tool_result_turn("18 C") == {"role": "user", "content": "<tool_response>\n18 C\n</tool_response>"}
    with pytest.raises(ValueError, match="not a JSON object"):
        assistant_turn("", [ToolCall("call_2", "add", "[1, 2]")])


def test_only_a_required_choice_constrains_and_a_named_one_names_its_function() -> None:
    assert call_constraint(TOOLS, ToolChoice(ChoiceMode.AUTO)) is None
    assert call_constraint(TOOLS, ToolChoice(ChoiceMode.NONE)) is None
    required = call_constraint(TOOLS, ToolChoice(ChoiceMode.REQUIRED))
    named = call_constraint(TOOLS, ToolChoice(ChoiceMode.REQUIRED, "add", parallel=False))
    assert required is not None
    assert named is not None
    assert '"anyOf"' in required.spec
    assert '("\\n" call)*' in required.spec
    assert '"const": "add"' in named.spec
    assert "get_weather" not in named.spec
    assert "call)*" not in named.spec
