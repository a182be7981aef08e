"""Tool calls read from a choice's text while it streams, their arguments given out as they are written.

A :class:`CallStreamer` gives back, in order: plain content (as :class:`~.tool_calls.CallScanner` gives
it: text that might start a ``<tool_call>`` tag is held back, blanks around calls dropped); for each
call a :class:`CallStart` (its id and function name) as soon as the block's ``name`` is read, is a
declared function, and its ``arguments`` object has begun; then its arguments as
:class:`CallArguments` fragments, the JSON text of the arguments object character for character as
the model writes it (only a possible ``</tool_call>`` tag's start is held back); and a
:class:`CallEnd` when the block closes. The fragments concatenate to exactly the ``arguments`` that
the whole block's reading gives (:func:`~.tool_calls.read_call`).

A block that writes its arguments before its name starts once the name is read, the arguments so far
as its first fragment. A block whose name is not a declared function, or that has no arguments
object (none at all, or not an object), is read whole at its end: a call, or when it is not one,
content as written. A call that has started stays a call: cut off by the end of the text it ends
incomplete (``CallEnd(complete=False)``) with the arguments written so far, and a block that turns
out not to be valid JSON after its arguments is still the call it started (where the whole answer's
reading leaves such a block in the content).
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, replace
from typing import Protocol

from kvgate.gateway.core.call_json import CallObjectScanner
from kvgate.gateway.core.tool_calls import new_call_id, partial_tag, read_call
from kvgate.gateway.core.tools import CALL_CLOSE, CALL_OPEN, ToolCall


@dataclass(frozen=True, slots=True)
class CallStart:
    """A call begins (its arguments follow as :class:`CallArguments`, then a :class:`CallEnd`)."""

    call_id: str
    name: str


@dataclass(frozen=True, slots=True)
class CallArguments:
    """The next fragment of the current call's arguments (JSON text, possibly cut mid-token)."""

    text: str


@dataclass(frozen=True, slots=True)
class CallEnd:
    """The current call is over; ``complete`` False: the text ended inside its block."""

    complete: bool = True


StreamPiece = str | CallStart | CallArguments | CallEnd


class CallStreamer:
    """One choice's text, scanned for calls as it streams; mutable. ``names``: the declared functions."""

    def __init__(self, names: Collection[str]) -> None:
        self._names = names
        self._buffer = ""  # text not given out: outside a block, a possible tag; inside, a possible close
        self._inside = False
        self._body = ""  # the open block's text so far
        self._object = CallObjectScanner()
        self._early = ""  # arguments read before the call could start
        self._started = False
        self.calls = 0  # calls started so far

    def feed(self, text: str) -> list[StreamPiece]:
        """The content, call starts, argument fragments and call ends that ``text`` completes."""
        self._buffer += text
        out: list[StreamPiece] = []
        while True:
            tag = CALL_CLOSE if self._inside else CALL_OPEN
            at = self._buffer.find(tag)
            if at < 0:
                out += self._body_text(self._held(CALL_CLOSE)) if self._inside else self._content()
                break
            before, self._buffer = self._buffer[:at], self._buffer[at + len(tag) :]
            if self._inside:
                out += self._body_text(before) + self._close()
                self._buffer = self._buffer.lstrip()
            elif before.strip():
                out.append(before.rstrip())  # blanks before a call are dropped
            self._inside = not self._inside
        return [p for p in out if p != ""]

    def finish(self) -> list[StreamPiece]:
        """What is left at the end: an open call's last arguments and its incomplete end, or held-back
        text (an unfinished block that never started a call) as content."""
        rest, self._buffer = self._buffer, ""
        if self._inside and self._started:
            self._inside = False
            return [*self._body_text(rest), CallEnd(complete=False)]
        if self._inside:
            rest, self._inside = CALL_OPEN + self._body + rest, False
        return [rest] if rest.strip() or (rest and not self.calls) else []

    def _held(self, tag: str) -> str:
        """The buffer but for an end that might begin ``tag`` (kept); the rest leaves the buffer."""
        keep = partial_tag(self._buffer, tag)
        head, self._buffer = (
            self._buffer[: len(self._buffer) - keep],
            self._buffer[len(self._buffer) - keep :],
        )
        return head

    def _content(self) -> list[StreamPiece]:
        head = self._held(CALL_OPEN)
        stripped = head.rstrip()  # trailing blanks wait: they may come before a call
        self._buffer = head[len(stripped) :] + self._buffer
        return [stripped] if stripped else []

    def _body_text(self, text: str) -> list[StreamPiece]:
        self._body += text
        found = self._object.feed(text)
        if self._started:
            return [CallArguments(found)] if found else []
        self._early += found
        name = self._object.name
        if name is None or name not in self._names or not self._early:
            return []  # a call starts with a declared name and an arguments object begun
        self._started, self.calls = True, self.calls + 1
        arguments, self._early = self._early, ""
        return [CallStart(new_call_id(), name), CallArguments(arguments)]

    def _close(self) -> list[StreamPiece]:
        body, started = self._body, self._started
        self._body, self._object, self._early, self._started = "", CallObjectScanner(), "", False
        if started:
            return [CallEnd()]
        call = read_call(body, self._names)
        if call is None:
            return [f"{CALL_OPEN}{body}{CALL_CLOSE}"]
        self.calls += 1
        return [CallStart(call.id, call.name), CallArguments(call.arguments), CallEnd()]


class Streamer(Protocol):
    """What reads calls from a choice's text as it streams (:class:`CallStreamer`, or a streamer of
    other formats: :mod:`kvgate.gateway.core.call_formats`)."""

    calls: int

    def feed(self, text: str) -> list[StreamPiece]: ...

    def finish(self) -> list[StreamPiece]: ...


def split_streamed(
    text: str, names: Collection[str], streamer: Streamer | None = None
) -> tuple[str | None, list[ToolCall]]:
    """A whole answer read as its stream is (by ``streamer``; None: a :class:`CallStreamer` of
    ``names``): its content (None when there is none besides its calls) and its calls, each with the
    arguments its fragments concatenate to (a call cut off by the end keeps what was written). The
    non-streamed form of the same answer, equal to it by construction."""
    streamer = streamer or CallStreamer(names)
    content: list[str] = []
    calls: list[ToolCall] = []
    for piece in streamer.feed(text) + streamer.finish():
        if isinstance(piece, str):
            content.append(piece)
        elif isinstance(piece, CallStart):
            calls.append(ToolCall(piece.call_id, piece.name, ""))
        elif isinstance(piece, CallArguments):
            calls[-1] = replace(calls[-1], arguments=calls[-1].arguments + piece.text)
    written = "".join(content)
    return (written or None) if calls else written, calls
