"""Tools (function calling) in the core's terms: declared functions, the caller's choice, how both are
written into the conversation, and the grammar that makes a required call valid.

kvgate renders tools the same way for every model (its documented default, so every chat template
works): the declarations go into the system message, between ``<tools>`` tags, one JSON object per line;
earlier calls are written back into their assistant turns as ``<tool_call>`` blocks, and tool results
become user turns between ``<tool_response>`` tags: the Hermes-style convention Qwen's templates, among
others, use. The declarations lead the prompt, so an agent's repeated tool block is a cached prefix.

A call the model writes is ``<tool_call>\\n{"name": ..., "arguments": {...}}\\n</tool_call>`` (see
:mod:`kvgate.gateway.core.tool_calls` for reading it back). When a call is required (``required`` or a
named function), decoding is constrained to exactly that shape, its ``arguments`` valid against the
function's ``parameters`` schema.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any

from kvgate.common.grammar import JSON_LAYOUT
from kvgate.gateway.core.request import ChatMessages
from kvgate.proto.constraint import ConstraintKind, OutputConstraint

CALL_OPEN, CALL_CLOSE = "<tool_call>", "</tool_call>"

_PREAMBLE = "# Tools\nYou may call these functions:"
_INSTRUCTIONS = (
    f'Call one by writing:\n{CALL_OPEN}\n{{"name": <name>, "arguments": <arguments object>}}\n{CALL_CLOSE}'
)
_NO_ARGUMENTS = {"type": "object", "properties": {}, "additionalProperties": False}


@dataclass(frozen=True, slots=True)
class Tool:
    """A declared function: ``parameters`` is a JSON schema of its arguments (an object; None: it
    takes none)."""

    name: str
    description: str = ""
    parameters: dict[str, Any] | None = None

    def declaration(self) -> dict[str, Any]:
        """How the tool is written into the prompt."""
        params = self.parameters if self.parameters is not None else _NO_ARGUMENTS
        described = {"description": self.description} if self.description else {}
        return {"name": self.name, **described, "parameters": params}


class ChoiceMode(Enum):
    NONE = "none"  # no call is made (the tools are still in the prompt: the prefix stays cached)
    AUTO = "auto"  # the model decides; its calls are read from its text
    REQUIRED = "required"  # at least one call, decoding constrained


@dataclass(frozen=True, slots=True)
class ToolChoice:
    """Whether the model calls tools: ``mode``, or one function by ``name`` (which implies REQUIRED);
    ``parallel``: more than one call allowed in one answer."""

    mode: ChoiceMode = ChoiceMode.AUTO
    name: str | None = None
    parallel: bool = True


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One call as it appears in a conversation: ``arguments`` is its JSON text."""

    id: str
    name: str
    arguments: str


def render_conversation(messages: ChatMessages, tools: Sequence[Tool]) -> ChatMessages:
    """``messages`` with the tool declarations appended to the leading system message (one is added
    when there is none). Pure; ``messages`` is not changed."""
    if not tools:
        return messages
    lines = "\n".join(json.dumps(t.declaration(), ensure_ascii=False, separators=(",", ":")) for t in tools)
    block = f"{_PREAMBLE}\n<tools>\n{lines}\n</tools>\n{_INSTRUCTIONS}"
    if messages and messages[0]["role"] in ("system", "developer"):
        first = messages[0] | {"content": f"{messages[0]['content']}\n\n{block}"}
        return [first, *messages[1:]]
    return [{"role": "system", "content": block}, *messages]


def assistant_turn(content: str, calls: Sequence[ToolCall]) -> dict[str, str]:
    """An earlier assistant turn with its calls written back as the model writes them. ValueError when
    a call's arguments are not a JSON object."""
    blocks = [content] if content else []
    for call in calls:
        arguments = json.loads(call.arguments or "{}")
        if not isinstance(arguments, dict):
            raise ValueError(f"the arguments of tool call {call.id!r} are not a JSON object")
        body = json.dumps({"name": call.name, "arguments": arguments}, ensure_ascii=False)
        blocks.append(f"{CALL_OPEN}\n{body}\n{CALL_CLOSE}")
    return {"role": "assistant", "content": "\n".join(blocks)}


def tool_result_turn(content: str) -> dict[str, str]:
    """A tool's result, as the user turn that carries it back to the model."""
    return {"role": "user", "content": f"<tool_response>\n{content}\n</tool_response>"}


def call_constraint(tools: Sequence[Tool], choice: ToolChoice) -> OutputConstraint | None:
    """The grammar a required call is decoded under: one ``<tool_call>`` block (or several, newline
    separated, when ``choice.parallel``) whose JSON names a declared function (``choice.name`` if
    given) with arguments valid against its ``parameters``. None when no call is required."""
    if choice.mode is not ChoiceMode.REQUIRED:
        return None
    chosen = [t for t in tools if choice.name is None or t.name == choice.name]
    schema = {"anyOf": [_call_schema(t) for t in chosen]} if len(chosen) > 1 else _call_schema(chosen[0])
    repeat = ' ("\\n" call)*' if choice.parallel else ""
    grammar = (
        f"start: call{repeat}\n"
        f'call: "{CALL_OPEN}\\n" body "\\n{CALL_CLOSE}"\n'
        f"body: %json {json.dumps(schema | {'x-guidance': JSON_LAYOUT}, ensure_ascii=False)}\n"
    )
    return OutputConstraint(ConstraintKind.LARK, grammar)


def _call_schema(tool: Tool) -> dict[str, Any]:
    params = tool.declaration()["parameters"]
    return {"type": "object", "properties": {"name": {"const": tool.name}, "arguments": params},
            "required": ["name", "arguments"], "additionalProperties": False}  # fmt: skip
