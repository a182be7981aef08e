"""Tool use in Anthropic's stream: the answer's content blocks one after another, each opened, filled
and closed. Text fills ``text`` blocks as ``text_delta`` events. A call opens a ``tool_use`` block
(its ``input`` empty) as soon as its name is read, then fills it with ``input_json_delta`` events, the
arguments' JSON text as the model writes it (:class:`~kvgate.gateway.core.call_stream.CallStreamer`;
in a family's own format, the whole input in one fragment once its block is read:
:mod:`kvgate.gateway.core.call_formats`), and closes it when the call's block closes. Clients
concatenate the ``partial_json`` fragments: they are the text whose object is the whole answer's
``input`` (:func:`.anthropic_tools.tool_input`). Block 0 is the text block the message starts with."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kvgate.gateway.core.call_formats import CallReading
from kvgate.gateway.core.call_stream import CallArguments, CallStart, StreamPiece
from kvgate.gateway.http_api.anthropic_tools import use_id

Event = Callable[[str, dict[str, Any]], bytes]


class ToolBlocks:
    """The content blocks of one streamed answer; mutable. ``event`` writes one server-sent event."""

    def __init__(self, reading: CallReading, event: Event) -> None:
        self._streamer = reading.streamer()
        self._event = event
        self._index = 0
        self._open: str | None = "text"  # the kind of the open block (block 0, text, opens the stream)

    @property
    def called(self) -> bool:
        return self._streamer.calls > 0

    def text(self, text: str) -> list[bytes]:
        """The events ``text`` completes."""
        return [e for piece in self._streamer.feed(text) for e in self._piece(piece)]

    def end(self) -> list[bytes]:
        """The held-back text's events (or a cut-off call's last fragment), then the last block's close."""
        out = [e for piece in self._streamer.finish() for e in self._piece(piece)]
        return out + (self._close() if self._open else [])

    def _piece(self, piece: StreamPiece) -> list[bytes]:
        if isinstance(piece, str):
            out = [] if self._open == "text" else self._next({"type": "text", "text": ""}, "text")
            return [*out, self._delta({"type": "text_delta", "text": piece})]
        if isinstance(piece, CallStart):
            block = {"type": "tool_use", "id": use_id(piece.call_id), "name": piece.name, "input": {}}
            return self._next(block, "tool_use")
        if isinstance(piece, CallArguments):
            return [self._delta({"type": "input_json_delta", "partial_json": piece.text})]
        return self._close()  # CallEnd, complete or cut off: the block ends either way

    def _delta(self, delta: dict[str, Any]) -> bytes:
        return self._event("content_block_delta", {"index": self._index, "delta": delta})

    def _close(self) -> list[bytes]:
        self._open = None
        return [self._event("content_block_stop", {"index": self._index})]

    def _next(self, block: dict[str, Any], kind: str) -> list[bytes]:
        """Closes the open block, opens ``block`` (of ``kind``) after it."""
        out = self._close() if self._open else []
        self._index += 1
        self._open = kind
        return [*out, self._event("content_block_start", {"index": self._index, "content_block": block})]
