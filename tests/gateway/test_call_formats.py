"""Tool calls read back per model family: Hermes ``<tool_call>`` blocks (always), Llama 3.x JSON calls
(``<|python_tag|>`` optional, ``;`` between calls) and Mistral's ``[TOOL_CALLS]`` list. Each answer is
read whole and streamed split at every position (one character a piece, and two pieces cut anywhere):
the content and calls are the same. A block that is not a valid call to a declared function stays
content as written; text that may begin a marker is held back, then released."""

from __future__ import annotations

import pytest

from kvgate.gateway.core.call_formats import HERMES, LLAMA_JSON, MISTRAL, CallReading, FormatScanner
from kvgate.gateway.core.call_formats.format import CallFormat
from kvgate.gateway.core.tool_calls import CallScanner, Piece
from kvgate.gateway.core.tools import ToolCall

NAMES = frozenset({"weather", "add"})
ALL = (HERMES, LLAMA_JSON, MISTRAL)
Read = list[str | tuple[str, str]]  # content runs merged; calls as (name, arguments)


def read(pieces: list[Piece]) -> Read:
    out: Read = []
    for piece in pieces:
        if isinstance(piece, ToolCall):
            out.append((piece.name, piece.arguments))
        elif out and isinstance(out[-1], str):
            out[-1] += piece
        else:
            out.append(piece)
    return out


def scanned(chunks: list[str], formats: tuple[CallFormat, ...] = ALL) -> Read:
    scanner = FormatScanner(NAMES, formats)
    return read([p for chunk in chunks for p in scanner.feed(chunk)] + scanner.finish())


def every_split(text: str, formats: tuple[CallFormat, ...] = ALL) -> Read:
    """The reading of ``text`` whole, checked equal to every streamed reading of it."""
    whole = scanned([text], formats)
    assert scanned(list(text), formats) == whole, "one character a piece"
    for cut in range(1, len(text)):
        assert scanned([text[:cut], text[cut:]], formats) == whole, f"cut at {cut}"
    return whole


WEATHER = '{"name": "weather", "arguments": {"city": "Oslo"}}'
CASES: dict[str, tuple[str, Read]] = {
    "hermes": (f"Let me see.\n<tool_call>\n{WEATHER}\n</tool_call>\nDone.",
               ["Let me see.", ("weather", '{"city": "Oslo"}'), "Done."]),
    "llama tagged, two calls": (
        '<|python_tag|>{"name": "weather", "parameters": {"city": "Lima"}}; '
        '{"name": "add", "parameters": {"a": 1, "b": 2}}',
        [("weather", '{"city": "Lima"}'), ("add", '{"a": 1, "b": 2}')]),
    "llama bare, arguments key, text after": (
        '  {"name": "add", "arguments": {"a": 1, "b": 2}}\nThat is all.',
        [("add", '{"a": 1, "b": 2}'), "That is all."]),
    "llama tag after content": (
        'Checking. <|python_tag|>{"name": "weather", "parameters": {"city": "}"}}',
        ["Checking.", ("weather", '{"city": "}"}')]),
    "mistral list": (
        f'Sure. [TOOL_CALLS] [{WEATHER}, {{"name": "add", "arguments": {{"a": 3}}}}] ok',
        ["Sure.", ("weather", '{"city": "Oslo"}'), ("add", '{"a": 3}'), "ok"]),
    "escaped quotes and brackets in strings": (
        r'{"name": "add", "parameters": {"note": "a \" } ] b"}} after',
        [("add", r'{"note": "a \" } ] b"}'), "after"]),
    "mistral without arguments": ('[TOOL_CALLS][{"name": "weather"}]', [("weather", "{}")]),
}  # fmt: skip


@pytest.mark.parametrize("case", CASES)
def test_each_format_reads_the_same_whole_and_split_anywhere(case: str) -> None:
    text, expected = CASES[case]
    assert every_split(text) == expected


INVALID = [
    "<|python_tag|>print('hi')",  # Llama's code interpreter, not a JSON call
    '<|python_tag|>{"name": "unknown", "parameters": {}}',  # not a declared function
    '{"name": "weather", "parameters": [1]}',  # arguments not an object
    '{"name": "weather", "parameters": {}}; {"name": "nope"}',  # one bad call spoils the block
    '{"answer": 42}',  # an answer that is JSON
    "[TOOL_CALLS] I cannot call that.",
    '[TOOL_CALLS] [{"name": "weather", "arguments": "Oslo"}]',
    '[TOOL_CALLS] [{"name": "weather", "arguments": {}}, {"name": "nope", "arguments": {}}]',
    '[TOOL_CALLS] [{"name": "weather", "arguments": {}}',  # cut off
    '<tool_call>{"name": "weather", "arguments": {}}',  # cut off
]


@pytest.mark.parametrize("text", INVALID)
def test_a_block_that_is_not_a_valid_call_stays_content_as_written(text: str) -> None:
    assert every_split(text) == [text]


def test_a_possible_marker_is_held_back_then_released() -> None:
    scanner = FormatScanner(NAMES, ALL)
    assert read(scanner.feed("Use [TOOL")) == ["Use"]  # the blank waits too: it may precede a block
    assert read(scanner.feed("S] here <|pyth")) == [" [TOOLS] here"]
    assert read(scanner.feed("on|> <tool")) == [" <|python|>"]
    assert read(scanner.finish()) == [" <tool"]


def test_a_marker_not_followed_by_its_block_is_given_out_at_once() -> None:
    scanner = FormatScanner(NAMES, ALL)
    assert read(scanner.feed("[TOOL_CALLS] I cannot")) == ["[TOOL_CALLS] I cannot"]
    assert read(scanner.feed(" do that.") + scanner.finish()) == [" do that."]


def test_json_is_a_bare_llama_call_only_at_the_start_of_the_answer() -> None:
    late = 'I would send {"name": "weather", "parameters": {}}'
    assert every_split(late) == [late]


def test_a_bare_call_is_read_only_where_the_model_writes_that_format() -> None:
    call = '{"name": "weather", "parameters": {"city": "Oslo"}}'
    assert scanned([call], (HERMES,)) == [call]
    assert scanned([f"[TOOL_CALLS] [{WEATHER}]"], (HERMES, LLAMA_JSON)) == [f"[TOOL_CALLS] [{WEATHER}]"]


HERMES_ANSWERS = [
    f"<tool_call>\n{WEATHER}\n</tool_call>",
    f"A\n<tool_call>{WEATHER}</tool_call>\n\n<tool_call>{WEATHER}</tool_call>  B  ",
    '<tool_call>{"name": "nope", "arguments": {}}</tool_call>tail',
    "plain text, trailing blanks  ",
    "<tool_call>unfinished",
    "half a tag <tool_c",
]


@pytest.mark.parametrize("text", HERMES_ANSWERS)
def test_hermes_alone_reads_as_the_hermes_scanner_does(text: str) -> None:
    plain = CallScanner(NAMES)
    assert scanned([text], (HERMES,)) == read(plain.feed(text) + plain.finish())


def test_blanks_after_a_block_that_is_not_a_call_are_kept() -> None:
    text = '<tool_call>{"name": "nope", "arguments": {}}</tool_call> tail'
    assert scanned([text], (HERMES,)) == [text]  # (the Hermes scanner drops them)


def test_a_reading_with_family_formats_streams_whole_calls() -> None:
    reading = CallReading(NAMES, ALL)
    text = 'Hm. <|python_tag|>{"name": "add", "parameters": {"a": 1}}'
    content, calls = reading.split(text)
    assert content == "Hm."
    assert [(c.name, c.arguments) for c in calls] == [("add", '{"a": 1}')]
