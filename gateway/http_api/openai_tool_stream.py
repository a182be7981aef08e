"""Tool calls in a chat stream, as OpenAI sends them: the content before a call streams as content
deltas; each call comes whole, once its block is complete, as one ``tool_calls`` delta (its ``index``
among the choice's calls, its id, name and arguments); a choice that called ends with
``finish_reason: "tool_calls"``."""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from kvgate.gateway.core.tool_calls import CallScanner, Piece
from kvgate.gateway.http_api import openai_format as fmt


class ToolDeltas:
    """The deltas of every choice of one stream; mutable, one per stream."""

    def __init__(self, rid: str, model: str, names: Collection[str]) -> None:
        self._rid, self._model, self._names = rid, model, names
        self._scanners: dict[int, CallScanner] = {}

    def text(self, index: int, text: str, logprobs: dict[str, Any] | None) -> list[bytes]:
        """The chunks ``text`` completes for choice ``index`` (``logprobs`` go with the first, or
        with an empty content delta when nothing is complete yet)."""
        chunks = self._chunks(index, self._scanner(index).feed(text))
        if logprobs is not None:
            if chunks:
                chunks[0]["choices"][0]["logprobs"] = logprobs
            else:
                chunks.append(fmt.chat_chunk(self._rid, self._model, {"content": ""}, None, index, logprobs))
        return [fmt.sse(c) for c in chunks]

    def end(self, index: int, reason: str) -> list[bytes]:
        """What choice ``index`` held back, then its finish chunk."""
        scanner = self._scanner(index)
        chunks = self._chunks(index, scanner.finish())
        finish = "tool_calls" if scanner.calls and reason == "stop" else reason
        chunks.append(fmt.chat_chunk(self._rid, self._model, {}, finish, index))
        return [fmt.sse(c) for c in chunks]

    def _scanner(self, index: int) -> CallScanner:
        return self._scanners.setdefault(index, CallScanner(self._names))

    def _chunks(self, index: int, pieces: list[Piece]) -> list[dict[str, Any]]:
        calls_before = self._scanner(index).calls - sum(not isinstance(p, str) for p in pieces)
        out = []
        for piece in pieces:
            if isinstance(piece, str):
                delta: dict[str, Any] = {"content": piece}
            else:
                delta = {"tool_calls": [fmt.call_json(piece, calls_before)]}
                calls_before += 1
            out.append(fmt.chat_chunk(self._rid, self._model, delta, None, index))
        return out
