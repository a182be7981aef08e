"""A :class:`~.scanner.FormatScanner` in the stream's terms: each call, once its block is read whole,
given out as a :class:`~kvgate.gateway.core.call_stream.CallStart`, its arguments in one
:class:`~kvgate.gateway.core.call_stream.CallArguments` fragment and a
:class:`~kvgate.gateway.core.call_stream.CallEnd`. (Only the Hermes form alone streams its arguments
as they are written: :class:`~kvgate.gateway.core.call_stream.CallStreamer`.)"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from kvgate.gateway.core.call_formats.format import CallFormat
from kvgate.gateway.core.call_formats.scanner import FormatScanner
from kvgate.gateway.core.call_stream import CallArguments, CallEnd, CallStart, StreamPiece
from kvgate.gateway.core.tool_calls import Piece


class WholeCallStreamer:
    """One choice's text, scanned for calls in ``formats``; mutable. Same interface as CallStreamer."""

    def __init__(self, names: Collection[str], formats: Sequence[CallFormat]) -> None:
        self._scanner = FormatScanner(names, formats)

    @property
    def calls(self) -> int:
        return self._scanner.calls

    def feed(self, text: str) -> list[StreamPiece]:
        return _stream(self._scanner.feed(text))

    def finish(self) -> list[StreamPiece]:
        return _stream(self._scanner.finish())


def _stream(pieces: list[Piece]) -> list[StreamPiece]:
    out: list[StreamPiece] = []
    for piece in pieces:
        if isinstance(piece, str):
            out.append(piece)
        else:
            out += [CallStart(piece.id, piece.name), CallArguments(piece.arguments), CallEnd()]
    return out
