"""Tool-call arguments streamed as the model writes them: whatever the pieces the text arrives in, a
call starts once its declared name is read, its argument fragments concatenate to exactly the
arguments the whole answer's reading gives, and blocks that are not calls stay content."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvgate.gateway.core.call_stream import (
    CallArguments,
    CallEnd,
    CallStart,
    CallStreamer,
    StreamPiece,
    split_streamed,
)
from kvgate.gateway.core.tool_calls import split_calls

NAMES = {"get_weather", "add"}
WEATHER = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'
TRICKY = ('<tool_call>\n{"name":"add","arguments":{ "q" : "a}\\"b</tool", "n": [1, {"x": null}],'
          ' "t": true, "e": -1.5e3 } }\n</tool_call>')  # fmt: skip


def streamed(text: str, size: int) -> list[StreamPiece]:
    streamer = CallStreamer(NAMES)
    pieces = [p for i in range(0, len(text), size) for p in streamer.feed(text[i : i + size])]
    return pieces + streamer.finish()


def calls(pieces: list[StreamPiece]) -> list[tuple[str, str, bool]]:
    """(name, concatenated arguments, complete) of each call, checking the pieces' order."""
    out: list[tuple[str, str, bool]] = []
    current: list = []
    for piece in pieces:
        if isinstance(piece, CallStart):
            assert not current, "a call started inside another"
            current = [piece.name, ""]
        elif isinstance(piece, CallArguments):
            current[1] += piece.text
        elif isinstance(piece, CallEnd):
            out.append((current[0], current[1], piece.complete))
            current = []
    assert not current, "a call never ended"
    return out


@pytest.mark.parametrize("size", [1, 2, 3, 7, 1000])
def test_fragments_concatenate_to_the_whole_answers_arguments(size: int) -> None:
    text = f"Sure: {WEATHER}\n{TRICKY}\nDone."
    pieces = streamed(text, size)
    content, whole = split_calls(text, NAMES)
    assert [(c.name, c.arguments) for c in split_streamed(text, NAMES)[1]] == [
        (c.name, c.arguments) for c in whole
    ]
    assert [(c.name, c.arguments, True) for c in whole] == calls(pieces)
    assert whole[1].arguments == '{ "q" : "a}\\"b</tool", "n": [1, {"x": null}], "t": true, "e": -1.5e3 }'
    assert content == "Sure:Done."
    assert "".join(p for p in pieces if isinstance(p, str)).replace("\n", "") == "Sure:Done."


def test_arguments_stream_before_the_block_is_complete() -> None:
    streamer = CallStreamer(NAMES)
    assert streamer.feed('<tool_call>\n{"name": "get_wea') == []
    first = streamer.feed('ther", "arguments": {"ci')
    assert [type(p) for p in first] == [CallStart, CallArguments]
    assert (first[0].name, first[1]) == ("get_weather", CallArguments('{"ci'))  # type: ignore[union-attr]
    assert streamer.feed('ty": "Pa') == [CallArguments('ty": "Pa')]
    assert streamer.feed('ris"}}\n</tool') == [CallArguments('ris"}')]  # the rest is not arguments
    assert streamer.feed("_call>") == [CallEnd()]
    assert streamer.calls == 1


def test_a_possible_closing_tag_inside_the_arguments_is_held_back() -> None:
    streamer = CallStreamer(NAMES)
    streamer.feed('<tool_call>{"name": "add", "arguments": {"a": "x</to')
    assert streamer.feed('y"}}</tool_call>') == [CallArguments('</toy"}'), CallEnd()]


@pytest.mark.parametrize(("block", "arguments"), [
    ('{"arguments": {"a": 1}, "name": "add"}', '{"a": 1}'),  # arguments before the name
    ('{"name": "add"}', "{}"),  # no arguments: none
])  # fmt: skip
def test_calls_in_other_shapes_read_as_the_whole_answer(block: str, arguments: str) -> None:
    text = f"<tool_call>\n{block}\n</tool_call>"
    assert calls(streamed(text, 4)) == [("add", arguments, True)]
    assert split_calls(text, NAMES)[1][0].arguments == arguments


@pytest.mark.parametrize("block", [
    '<tool_call>\n{"name": "launch", "arguments": {}}\n</tool_call>',  # not declared
    "<tool_call>\nnot json\n</tool_call>",
    '<tool_call>\n{"name": "add", "arguments": [1]}\n</tool_call>',  # arguments not an object
])  # fmt: skip
def test_a_block_that_never_starts_a_call_stays_content(block: str) -> None:
    pieces = streamed(f"x {block}", 3)
    assert calls(pieces) == []
    assert "".join(p for p in pieces if isinstance(p, str)) == f"x{block}"


@pytest.mark.parametrize(("text", "arguments"), [
    ('<tool_call>\n{"name": "add", "arguments": {"a": 1', '{"a": 1'),  # cut inside the arguments
    ('<tool_call>\n{"name": "add", "arguments": {"a": 1}}\n</tool', '{"a": 1}'),  # before the tag closed
])  # fmt: skip
def test_a_call_cut_off_ends_incomplete_with_what_was_written(text: str, arguments: str) -> None:
    assert calls(streamed(f"Hm. {text}", 5)) == [("add", arguments, False)]
    content, whole = split_streamed(f"Hm. {text}", NAMES)  # the whole answer reads the same
    assert (content, [(c.name, c.arguments) for c in whole]) == ("Hm.", [("add", arguments)])


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=8,
)  # fmt: skip


@settings(max_examples=150, deadline=None)
@given(
    arguments=st.dictionaries(st.text(max_size=6), json_values, max_size=4),
    spaced=st.booleans(),
    ascii_only=st.booleans(),
    size=st.integers(1, 9),
)
def test_any_arguments_in_any_pieces_concatenate_exactly(
    arguments: dict, spaced: bool, ascii_only: bool, size: int
) -> None:
    separators = (", ", ": ") if spaced else (",", ":")
    written = json.dumps(arguments, separators=separators, ensure_ascii=ascii_only)
    text = f'<tool_call>\n{{"name": "add", "arguments": {written}}}\n</tool_call>'
    whole = split_calls(text, NAMES)[1]
    found = calls(streamed(text, size))
    if "</tool_call>" in written:  # a string holding the closing tag ends the block early, both ways
        return
    assert [(c.name, c.arguments) for c in whole] == [(name, args) for name, args, _ in found]
    assert found[0][1] == written
    assert json.loads(found[0][1]) == arguments
