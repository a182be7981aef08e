"""Llama 3.x's JSON calls: an optional ``<|python_tag|>``, then one call object or several separated by
``;``, each ``{"name": ..., "parameters": {...}}`` (``"arguments"`` is read too). Without the tag the
calls must be the first thing the answer says. The block ends with its last object (at the end of the
answer, or where text other than ``;`` follows)."""

from __future__ import annotations

import json
from collections.abc import Collection
from dataclasses import dataclass

from kvgate.gateway.core.call_formats.spans import object_run, split_objects
from kvgate.gateway.core.call_json import raw_arguments
from kvgate.gateway.core.tool_calls import new_call_id
from kvgate.gateway.core.tools import ToolCall

PYTHON_TAG = "<|python_tag|>"
_KEYS = ("parameters", "arguments")


@dataclass(frozen=True, slots=True)
class LlamaJsonFormat:
    name: str = "llama3_json"
    markers: tuple[str, ...] = (PYTHON_TAG,)
    kept: tuple[str, ...] = (PYTHON_TAG,)
    bare_start: bool = True

    def block_length(self, text: str, final: bool) -> int | None:
        end, open_ = object_run(text, ";")
        if open_ and not final:
            return None
        return len(text) if open_ else end

    def calls(self, block: str, names: Collection[str]) -> list[ToolCall] | None:
        objects = split_objects(block, ";")
        calls = [call for o in objects or () if (call := read_object(o, names)) is not None]
        return calls if objects and len(calls) == len(objects) else None


def read_object(text: str, names: Collection[str]) -> ToolCall | None:
    """The call one object makes: a declared ``name``, arguments under ``parameters`` or
    ``arguments`` (an object; absent: none); None otherwise."""
    try:
        found = json.loads(text)
    except json.JSONDecodeError:
        return None
    if not isinstance(found, dict) or found.get("name") not in names:
        return None
    key = next((k for k in _KEYS if k in found), None)
    if key is not None and not isinstance(found[key], dict):
        return None
    raw = raw_arguments(text, key) if key is not None else None
    return ToolCall(new_call_id(), found["name"], raw if raw is not None else "{}")


LLAMA_JSON = LlamaJsonFormat()
