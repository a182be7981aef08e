"""Tool calls in a chat stream, as OpenAI sends them: the content before a call streams as content
deltas; each call's first ``tool_calls`` delta carries its ``index`` among the choice's calls, its
``id``, ``type`` and ``function.name`` with ``arguments: ""``, and the next ones (``index`` and
``function.arguments`` only) the arguments' JSON text as the model writes it
(:class:`~kvgate.gateway.core.call_stream.CallStreamer`; in a family's own format, the whole
arguments once its block is read: :mod:`kvgate.gateway.core.call_formats`); clients concatenate
them. A choice that called ends with ``finish_reason: "tool_calls"``."""

from __future__ import annotations

from typing import Any

from kvgate.gateway.core.call_formats import CallReading
from kvgate.gateway.core.call_stream import CallEnd, CallStart, Streamer, StreamPiece
from kvgate.gateway.http_api import openai_format as fmt


class ToolDeltas:
    """The deltas of every choice of one stream; mutable, one per stream."""

    def __init__(self, rid: str, model: str, reading: CallReading) -> None:
        self._rid, self._model, self._reading = rid, model, reading
        self._streamers: dict[int, Streamer] = {}

    def text(self, index: int, text: str, logprobs: dict[str, Any] | None) -> list[bytes]:
        """The chunks ``text`` completes for choice ``index`` (``logprobs`` go with the first, or
        with an empty content delta when nothing is complete yet)."""
        chunks = self._chunks(index, self._streamer(index).feed(text))
        if logprobs is not None:
            if chunks:
                chunks[0]["choices"][0]["logprobs"] = logprobs
            else:
                chunks.append(fmt.chat_chunk(self._rid, self._model, {"content": ""}, None, index, logprobs))
        return [fmt.sse(c) for c in chunks]

    def end(self, index: int, reason: str) -> list[bytes]:
        """What choice ``index`` held back, then its finish chunk."""
        streamer = self._streamer(index)
        chunks = self._chunks(index, streamer.finish())
        finish = "tool_calls" if streamer.calls and reason == "stop" else reason
        chunks.append(fmt.chat_chunk(self._rid, self._model, {}, finish, index))
        return [fmt.sse(c) for c in chunks]

    def _streamer(self, index: int) -> Streamer:
        if index not in self._streamers:
            self._streamers[index] = self._reading.streamer()
        return self._streamers[index]

    def _chunks(self, index: int, pieces: list[StreamPiece]) -> list[dict[str, Any]]:
        call = self._streamer(index).calls - sum(isinstance(p, CallStart) for p in pieces) - 1  # the open one
        out = []
        for piece in pieces:
            if isinstance(piece, CallEnd):
                continue
            if isinstance(piece, str):
                delta: dict[str, Any] = {"content": piece}
            elif isinstance(piece, CallStart):
                call += 1
                function = {"name": piece.name, "arguments": ""}
                delta = {"tool_calls": [{"index": call, "id": piece.call_id, "type": "function",
                                         "function": function}]}  # fmt: skip
            else:
                delta = {"tool_calls": [{"index": call, "function": {"arguments": piece.text}}]}
            out.append(fmt.chat_chunk(self._rid, self._model, delta, None, index))
        return out
