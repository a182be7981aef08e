"""OpenAI's tools on the wire, translated: ``tools``, ``tool_choice`` and ``parallel_tool_calls`` to the
core's :class:`~kvgate.gateway.core.tools.Tool` / :class:`~kvgate.gateway.core.tools.ToolChoice`,
assistant ``tool_calls`` and ``tool`` messages to conversation turns, and calls back to OpenAI's shape.
"""

from __future__ import annotations

from kvgate.gateway.core.request import ChatMessages
from kvgate.gateway.core.tools import (
    ChoiceMode,
    Tool,
    ToolCall,
    ToolChoice,
    assistant_turn,
    render_conversation,
    tool_result_turn,
)
from kvgate.gateway.errors import invalid
from kvgate.gateway.http_api.openai_schemas import ChatCompletionRequest


def tools_of(body: ChatCompletionRequest) -> list[Tool]:
    """The declared functions; INVALID_REQUEST for two of one name."""
    declared = [t.function for t in body.tools or ()]
    tools = [Tool(f.name, f.description or "", f.parameters) for f in declared]
    names = [t.name for t in tools]
    if len(set(names)) != len(names):
        raise invalid("`tools` declares a function name twice", "tools")
    return tools


def choice_of(body: ChatCompletionRequest, tools: list[Tool]) -> ToolChoice:
    """The caller's choice (OpenAI's default: ``auto`` with tools, ``none`` without); INVALID_REQUEST
    for ``required`` or a named function without tools, or a name that is not declared."""
    parallel = body.parallel_tool_calls is not False
    wanted = body.tool_choice
    if wanted is None:
        return ToolChoice(ChoiceMode.AUTO if tools else ChoiceMode.NONE, parallel=parallel)
    if not tools and wanted != "none" and wanted != "auto":
        raise invalid("`tool_choice` requires a call, but no `tools` are declared", "tool_choice")
    if isinstance(wanted, str):
        return ToolChoice(ChoiceMode(wanted), parallel=parallel)
    if wanted.function.name not in {t.name for t in tools}:
        message = f"`tool_choice` names `{wanted.function.name}`, which is not among `tools`"
        raise invalid(message, "tool_choice")
    return ToolChoice(ChoiceMode.REQUIRED, wanted.function.name, parallel)


def conversation(body: ChatCompletionRequest, tools: list[Tool]) -> ChatMessages:
    """The messages as the chat template takes them: earlier calls written back into their assistant
    turns, tool results as user turns, the declarations in the system message. INVALID_REQUEST for
    a call whose arguments are not a JSON object."""
    messages: ChatMessages = []
    for i, message in enumerate(body.messages):
        if message.role == "tool":
            messages.append(tool_result_turn(message.text()))
        elif message.tool_calls:
            calls = [ToolCall(c.id, c.function.name, c.function.arguments) for c in message.tool_calls]
            try:
                messages.append(assistant_turn(message.text(), calls))
            except ValueError as exc:  # json.JSONDecodeError included
                message = f"tool call arguments must be a JSON object: {exc}"
                raise invalid(message, f"messages.{i}.tool_calls") from exc
        else:
            messages.append({"role": message.role, "content": message.text()})
    return render_conversation(messages, tools)


def readable_names(body: ChatCompletionRequest) -> frozenset[str] | None:
    """The functions whose calls are read from the answer; None when none are (no tools, or
    ``tool_choice: none``)."""
    if not body.tools or body.tool_choice == "none":
        return None
    return frozenset(t.function.name for t in body.tools)
