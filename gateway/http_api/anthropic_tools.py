"""Anthropic's tools on the wire, translated: ``tools`` and ``tool_choice`` to the core's
:class:`~kvgate.gateway.core.tools.Tool` / :class:`~kvgate.gateway.core.tools.ToolChoice`, a turn's
``tool_use`` and ``tool_result`` blocks to conversation turns, and calls back to ``tool_use`` blocks."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from pydantic_core import from_json

from kvgate.gateway.core.request import ChatMessages
from kvgate.gateway.core.tools import ChoiceMode, Tool, ToolCall, ToolChoice, assistant_turn, tool_result_turn
from kvgate.gateway.errors import invalid
from kvgate.gateway.http_api.anthropic_schemas import (
    MessagesRequest,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
)

_MODES = {"auto": ChoiceMode.AUTO, "any": ChoiceMode.REQUIRED, "tool": ChoiceMode.REQUIRED,
          "none": ChoiceMode.NONE}  # fmt: skip


def tools_of(body: MessagesRequest) -> list[Tool]:
    """The declared tools; INVALID_REQUEST for two of one name."""
    tools = [Tool(t.name, t.description or "", t.input_schema) for t in body.tools or ()]
    if len({t.name for t in tools}) != len(tools):
        raise invalid("`tools` declares a tool name twice", "tools")
    return tools


def choice_of(body: MessagesRequest, tools: list[Tool]) -> ToolChoice:
    """The caller's choice (Anthropic's default: ``auto``); INVALID_REQUEST for ``any`` or ``tool``
    without tools, ``tool`` without a declared ``name``."""
    wanted = body.tool_choice
    if wanted is None:
        return ToolChoice(ChoiceMode.AUTO)
    parallel = not wanted.disable_parallel_tool_use
    if _MODES[wanted.type] is ChoiceMode.REQUIRED and not tools:
        message = f"`tool_choice` `{wanted.type}` requires a call, but no `tools` are declared"
        raise invalid(message, "tool_choice")
    if wanted.type != "tool":
        return ToolChoice(_MODES[wanted.type], parallel=parallel)
    if wanted.name not in {t.name for t in tools}:
        raise invalid(f"`tool_choice` names `{wanted.name}`, which is not among `tools`", "tool_choice")
    return ToolChoice(ChoiceMode.REQUIRED, wanted.name, parallel)


def readable_names(body: MessagesRequest) -> frozenset[str] | None:
    """The tools whose calls are read from the answer; None when none are (no tools, or ``none``)."""
    if not body.tools or (body.tool_choice is not None and body.tool_choice.type == "none"):
        return None
    return frozenset(t.name for t in body.tools)


def turns(role: str, blocks: Sequence[TextBlock | ToolUseBlock | ToolResultBlock]) -> ChatMessages:
    """One Anthropic turn as conversation turns: a user turn's tool results each become their own
    turn (before its text); an assistant turn's tool uses are written back into it."""
    text = "".join(b.text for b in blocks if isinstance(b, TextBlock))
    if role == "assistant":
        calls = [ToolCall(b.id, b.name, json.dumps(b.input, ensure_ascii=False))
                 for b in blocks if isinstance(b, ToolUseBlock)]  # fmt: skip
        return [assistant_turn(text, calls)] if calls else [{"role": role, "content": text}]
    if any(isinstance(b, ToolUseBlock) for b in blocks):
        raise invalid("`tool_use` blocks belong to assistant turns", "messages")
    results = [tool_result_turn(b.text()) for b in blocks if isinstance(b, ToolResultBlock)]
    return results + ([{"role": role, "content": text}] if text or not results else [])


def use_id(call_id: str) -> str:
    """A call's id as Anthropic spells it (``toolu_`` for ``call_``)."""
    return f"toolu_{call_id.removeprefix('call_')}"


def tool_input(arguments: str) -> dict[str, Any]:
    """The ``input`` of a call whose arguments are the JSON text ``arguments``: the object they write;
    for a call cut off by the token limit, its members complete so far, as Anthropic's SDK reads the
    same text streamed (jiter's partial mode: a cut string is left out); ``{}`` when the text is not
    an object (a model's malformed arguments)."""
    try:
        found = from_json(arguments, allow_partial=True)
    except ValueError:
        return {}
    return found if isinstance(found, dict) else {}


def tool_use_json(call: ToolCall) -> dict[str, Any]:
    """A call as Anthropic writes it: a ``tool_use`` block with its parsed ``input``."""
    return {"type": "tool_use", "id": use_id(call.id), "name": call.name, "input": tool_input(call.arguments)}
