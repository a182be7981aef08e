"""The output items of a response as its text arrives: ``message`` items of ``output_text`` and
``function_call`` items, with the stream events that build them.

One :class:`OutputItems` serves both answers: a stream renders the events it returns (adding their
``sequence_number``), a whole answer only reads :attr:`OutputItems.items` at the end, so the two are
the same by construction. Without tools the text is one message. With tools (the functions whose calls
are read), the text is scanned for calls as it comes (:class:`~kvgate.gateway.core.call_stream.CallStreamer`):
text before a call is a message of its own, closed when the call starts; each call is one
``function_call`` item, added when it starts, its arguments streamed as ``function_call_arguments``
deltas as the model writes them, done when its block closes (``incomplete`` when the text ended inside
it).
"""

from __future__ import annotations

import json
import uuid
from typing import Any

from kvgate.gateway.core.call_formats import CallReading
from kvgate.gateway.core.call_stream import CallArguments, CallEnd, CallStart, StreamPiece
from kvgate.gateway.core.tools import CALL_OPEN, ToolCall, assistant_turn

Event = dict[str, Any]


def item_id(prefix: str) -> str:
    """A fresh item id, as OpenAI spells them (``msg_...``, ``fc_...``)."""
    return f"{prefix}_{uuid.uuid4().hex}"


class OutputItems:
    """One response's output; mutable, one per response."""

    def __init__(self, tools: CallReading | None) -> None:
        self._scanner = tools.streamer() if tools is not None else None
        self.items: list[dict[str, Any]] = []  # finished items, in output order
        self._open: dict[str, Any] | None = None  # the message or the call being written
        self._parts: list[str] = []  # its text or arguments so far

    def text(self, text: str) -> list[Event]:
        """The events ``text`` (the next piece of the answer) completes."""
        pieces: list[StreamPiece] = [text] if self._scanner is None else self._scanner.feed(text)
        return [event for piece in pieces if piece != "" for event in self._piece(piece)]

    def finish(self, complete: bool) -> list[Event]:
        """The events of the end: what was held back, then the last message closed (``complete``
        False: it was cut off by the token limit). An answer of nothing is one empty message."""
        rest = self._scanner.finish() if self._scanner is not None else []
        events = [event for piece in rest for event in self._piece(piece)]
        if not self.items and self._open is None:
            events += self._start_message()
        return events + self._close_message("completed" if complete else "incomplete")

    def turn(self) -> dict[str, str]:
        """The output as the assistant turn a continuation renders: its texts and its calls (written
        back as the model writes them) in the order they came, a line apart, as chat completions
        writes back an assistant message with its ``tool_calls``."""
        blocks = [_block(item) for item in self.items]
        return {"role": "assistant", "content": "\n".join(b for b in blocks if b)}

    def _piece(self, piece: StreamPiece) -> list[Event]:
        if isinstance(piece, CallStart):
            return self._close_message("completed") + self._start_call(piece)
        if isinstance(piece, CallArguments):
            return self._arguments(piece.text)
        if isinstance(piece, CallEnd):
            return self._close_call("completed" if piece.complete else "incomplete")
        events = self._start_message() if self._open is None else []
        self._parts.append(piece)
        where = {"item_id": self._open["id"], "output_index": len(self.items), "content_index": 0}  # type: ignore[index]
        return [*events, {"type": "response.output_text.delta", **where, "delta": piece, "logprobs": []}]

    def _start_message(self) -> list[Event]:
        self._open = {"id": item_id("msg"), "type": "message", "status": "in_progress", "role": "assistant",
                      "content": []}  # fmt: skip
        where = {"item_id": self._open["id"], "output_index": len(self.items), "content_index": 0}
        return [
            {"type": "response.output_item.added", "output_index": len(self.items), "item": dict(self._open)},
            {"type": "response.content_part.added", **where, "part": _text_part("")},
        ]

    def _close_message(self, status: str) -> list[Event]:
        if self._open is None or self._open["type"] != "message":
            return []
        text, index = "".join(self._parts), len(self.items)
        item = self._open | {"status": status, "content": [_text_part(text)]}
        where = {"item_id": item["id"], "output_index": index, "content_index": 0}
        self.items.append(item)
        self._open, self._parts = None, []
        return [
            {"type": "response.output_text.done", **where, "text": text, "logprobs": []},
            {"type": "response.content_part.done", **where, "part": _text_part(text)},
            {"type": "response.output_item.done", "output_index": index, "item": item},
        ]

    def _start_call(self, start: CallStart) -> list[Event]:
        self._open = {"id": item_id("fc"), "type": "function_call", "status": "in_progress",
                      "call_id": start.call_id, "name": start.name, "arguments": ""}  # fmt: skip
        return [
            {"type": "response.output_item.added", "output_index": len(self.items), "item": dict(self._open)}
        ]

    def _arguments(self, text: str) -> list[Event]:
        assert self._open is not None
        self._parts.append(text)
        where = {"item_id": self._open["id"], "output_index": len(self.items)}
        return [{"type": "response.function_call_arguments.delta", **where, "delta": text}]

    def _close_call(self, status: str) -> list[Event]:
        assert self._open is not None
        index, arguments = len(self.items), "".join(self._parts)
        item = self._open | {"status": status, "arguments": arguments}
        self.items.append(item)
        self._open, self._parts = None, []
        where = {"item_id": item["id"], "output_index": index}
        return [
            {"type": "response.function_call_arguments.done", **where, "name": item["name"],
             "arguments": arguments},
            {"type": "response.output_item.done", "output_index": index, "item": item},
        ]  # fmt: skip


def _block(item: dict[str, Any]) -> str:
    if item["type"] == "message":
        return "".join(part["text"] for part in item["content"])
    if item["status"] == "incomplete":  # cut off: its block as far as the model wrote it
        return f'{CALL_OPEN}\n{{"name": {json.dumps(item["name"])}, "arguments": {item["arguments"]}'
    return assistant_turn("", [ToolCall(item["call_id"], item["name"], item["arguments"])])["content"]


def _text_part(text: str) -> dict[str, Any]:
    return {"type": "output_text", "text": text, "annotations": [], "logprobs": []}
