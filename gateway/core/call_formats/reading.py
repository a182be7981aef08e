"""How one request's calls are read: the functions it declared and the formats the served model writes."""

from __future__ import annotations

from dataclasses import dataclass

from kvgate.gateway.core.call_formats.format import CallFormat
from kvgate.gateway.core.call_formats.hermes import HERMES
from kvgate.gateway.core.call_formats.whole_stream import WholeCallStreamer
from kvgate.gateway.core.call_stream import CallStreamer, Streamer, split_streamed
from kvgate.gateway.core.tools import ToolCall


@dataclass(frozen=True, slots=True)
class CallReading:
    """``names``: the declared functions; ``formats``: the formats read (Hermes first). With Hermes
    alone, calls stream their arguments as they are written; with other formats too, each call is
    given out once its block is read whole."""

    names: frozenset[str]
    formats: tuple[CallFormat, ...] = (HERMES,)

    def streamer(self) -> Streamer:
        """A fresh streamer of calls (one per choice)."""
        hermes_only = self.formats == (HERMES,)
        return CallStreamer(self.names) if hermes_only else WholeCallStreamer(self.names, self.formats)

    def split(self, text: str) -> tuple[str | None, list[ToolCall]]:
        """A whole answer's content and calls, read as its stream is (see ``split_streamed``)."""
        return split_streamed(text, self.names, self.streamer())
