"""Mistral's calls: ``[TOOL_CALLS]`` then one JSON list of ``{"name": ..., "arguments": {...}}``
objects. The block ends with the list."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from kvgate.gateway.core.call_formats.llama_json import read_object
from kvgate.gateway.core.call_formats.spans import skip_blanks, split_objects, value_end
from kvgate.gateway.core.tools import ToolCall

TOOL_CALLS = "[TOOL_CALLS]"


@dataclass(frozen=True, slots=True)
class MistralFormat:
    name: str = "mistral"
    markers: tuple[str, ...] = (TOOL_CALLS,)
    kept: tuple[str, ...] = (TOOL_CALLS,)
    bare_start: bool = False

    def block_length(self, text: str, final: bool) -> int | None:
        at = skip_blanks(text, 0)
        if at == len(text):
            return None
        if text[at] != "[":
            return 0  # not a list: the marker alone is the block (and not a call)
        return value_end(text, at)

    def calls(self, block: str, names: Collection[str]) -> list[ToolCall] | None:
        inner = block.strip()
        objects = split_objects(inner[1:-1], ",") if inner.startswith("[") else None
        calls = [call for o in objects or () if (call := read_object(o, names)) is not None]
        return calls if objects and len(calls) == len(objects) else None


MISTRAL = MistralFormat()
