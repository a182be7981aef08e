"""Reading tool calls back from a model's text: ``<tool_call>`` blocks of JSON naming a declared
function, as they stream in.

A :class:`CallScanner` takes the text in pieces (a whole answer is one piece) and gives back, in order,
the text that is plain content and every complete call, its ``arguments`` the JSON text of the
arguments object as the model wrote it (``{}`` when it wrote none). A block that is not a call (not JSON, no
``name``, an undeclared function, arguments that are not an object) stays content, as written; so does
a block cut off by the end. Text that might be the start of a tag is held back until it is known not
to be one; blanks around calls are dropped.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Collection

from kvgate.gateway.core.call_json import raw_arguments
from kvgate.gateway.core.tools import CALL_CLOSE, CALL_OPEN, ToolCall

Piece = str | ToolCall


def new_call_id() -> str:
    """A fresh call id, as OpenAI spells them (``call_`` + 24 characters)."""
    return f"call_{uuid.uuid4().hex[:24]}"


class CallScanner:
    """One choice's text, scanned for calls; mutable. ``names``: the declared functions."""

    def __init__(self, names: Collection[str]) -> None:
        self._names = names
        self._buffer = ""
        self._inside = False
        self.calls = 0  # complete calls found so far

    def feed(self, text: str) -> list[Piece]:
        """The content and calls that ``text`` completes (possibly none yet)."""
        self._buffer += text
        out: list[Piece] = []
        while True:
            tag = CALL_CLOSE if self._inside else CALL_OPEN
            at = self._buffer.find(tag)
            if at < 0:
                break
            before, self._buffer = self._buffer[:at], self._buffer[at + len(tag) :]
            if self._inside:
                out.append(self._call(before))
            elif before.strip():
                out.append(before.rstrip())  # blanks before a call are dropped
            self._inside = not self._inside
            if not self._inside:
                self._buffer = self._buffer.lstrip()
        if not self._inside:
            out += self._safe_text()
        return [p for p in out if p != ""]

    def finish(self) -> list[Piece]:
        """What is left at the end: held-back text, or an unfinished block, as content (trailing
        blanks only when no call was made: then the content is the text as written)."""
        rest = (CALL_OPEN + self._buffer) if self._inside else self._buffer
        self._buffer, self._inside = "", False
        return [rest] if rest.strip() or (rest and not self.calls) else []

    def _safe_text(self) -> list[Piece]:
        """Content that cannot be part of an opening tag; the rest (a possible tag's start, trailing
        blanks) stays in the buffer."""
        keep = partial_tag(self._buffer)
        head = self._buffer[: len(self._buffer) - keep]
        stripped = head.rstrip()
        self._buffer = self._buffer[len(stripped) :]
        return [stripped] if stripped else []

    def _call(self, body: str) -> Piece:
        call = read_call(body, self._names)
        if call is None:
            return f"{CALL_OPEN}{body}{CALL_CLOSE}"
        self.calls += 1
        return call


def read_call(body: str, names: Collection[str]) -> ToolCall | None:
    """The call that block ``body`` (the text between the tags) makes, with its arguments as written;
    None when it is not a call: not JSON, no ``name`` among ``names``, arguments not an object."""
    try:
        found = json.loads(body)
    except json.JSONDecodeError:
        found = None
    name = found.get("name") if isinstance(found, dict) else None
    arguments = found.get("arguments", {}) if isinstance(found, dict) else None
    if name not in names or not isinstance(arguments, dict):
        return None
    raw = raw_arguments(body)
    return ToolCall(
        new_call_id(), name, raw if raw is not None else json.dumps(arguments, ensure_ascii=False)
    )


def partial_tag(text: str, tag: str = CALL_OPEN) -> int:
    """Length of the longest end of ``text`` that begins ``tag`` (0: none)."""
    for n in range(min(len(text), len(tag) - 1), 0, -1):
        if tag.startswith(text[-n:]):
            return n
    return 0


def split_calls(text: str, names: Collection[str]) -> tuple[str | None, list[ToolCall]]:
    """A whole answer's content (None when there is none besides its calls) and its calls."""
    scanner = CallScanner(names)
    pieces = scanner.feed(text) + scanner.finish()
    content = "".join(p for p in pieces if isinstance(p, str))
    calls = [p for p in pieces if isinstance(p, ToolCall)]
    return (content or None) if calls else content, calls
