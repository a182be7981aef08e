"""Tool use in Anthropic's stream: the answer's content blocks one after another, each opened, filled
and closed: text as ``text_delta`` events, and each call, once its block is complete, as a
``tool_use`` block (its ``input`` empty at the start) filled by one ``input_json_delta``. Block 0 is the
text block the message starts with."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kvgate.gateway.core.call_formats import CallReading
from kvgate.gateway.core.tool_calls import Piece
from kvgate.gateway.http_api.anthropic_tools import tool_use_json

Event = Callable[[str, dict[str, Any]], bytes]


class ToolBlocks:
    """The content blocks of one streamed answer; mutable. ``event`` writes one server-sent event."""

    def __init__(self, reading: CallReading, event: Event) -> None:
        self._scanner = reading.scanner()
        self._event = event
        self._index = 0
        self._open: str | None = "text"  # the kind of the open block (block 0, text, opens the stream)

    @property
    def called(self) -> bool:
        return self._scanner.calls > 0

    def text(self, text: str) -> list[bytes]:
        """The events ``text`` completes."""
        return [e for piece in self._scanner.feed(text) for e in self._piece(piece)]

    def end(self) -> list[bytes]:
        """The held-back text's events, then the last block's close."""
        out = [e for piece in self._scanner.finish() for e in self._piece(piece)]
        return out + ([self._event("content_block_stop", {"index": self._index})] if self._open else [])

    def _piece(self, piece: Piece) -> list[bytes]:
        if isinstance(piece, str):
            out = [] if self._open == "text" else self._next({"type": "text", "text": ""}, "text")
            delta = {"type": "text_delta", "text": piece}
            return [*out, self._event("content_block_delta", {"index": self._index, "delta": delta})]
        block = tool_use_json(piece)
        out = self._next(block | {"input": {}}, None)
        arguments = {"type": "input_json_delta", "partial_json": piece.arguments}
        out.append(self._event("content_block_delta", {"index": self._index, "delta": arguments}))
        return [*out, self._event("content_block_stop", {"index": self._index})]

    def _next(self, block: dict[str, Any], kind: str | None) -> list[bytes]:
        """Closes the open block, opens ``block`` after it (left open when ``kind`` says so)."""
        out = [self._event("content_block_stop", {"index": self._index})] if self._open else []
        self._index += 1
        self._open = kind
        return [*out, self._event("content_block_start", {"index": self._index, "content_block": block})]
