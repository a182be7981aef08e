"""A ``/v1/responses`` body -> the core's chat input: instructions, the earlier turns of
``previous_response_id``, this request's input items, tools and the output constraint.

The prompt is ``instructions`` (a system message), then the stored conversation, then the input items,
rendered with the chat template as chat completions renders messages (tools declared in the system
message, calls written back into assistant turns, call results as user turns: see
:mod:`kvgate.gateway.core.tools`). So a continuation's prompt begins with the earlier turn's prompt
and answer, given the same instructions and tools: a cached prefix on the worker that served it.
"""

from __future__ import annotations

from collections.abc import Sequence

from kvgate.gateway.core.request import ChatInput, ChatMessages, GenerateRequest
from kvgate.gateway.core.tools import (
    ChoiceMode,
    Tool,
    ToolCall,
    ToolChoice,
    assistant_turn,
    call_constraint,
    render_conversation,
    tool_result_turn,
)
from kvgate.gateway.errors import invalid
from kvgate.gateway.http_api import responses_support
from kvgate.gateway.http_api.responses_schemas import (
    FormatJsonObject,
    FormatJsonSchema,
    FunctionCallItem,
    FunctionCallOutputItem,
    FunctionTool,
    MessageItem,
    ResponsesRequest,
)
from kvgate.proto.constraint import OutputConstraint

FORMAT_PARAM = "text.format"


def responses_request(body: ResponsesRequest, earlier: Sequence[dict[str, str]]) -> GenerateRequest:
    """The core's request for ``body`` continuing the conversation ``earlier`` (empty for a first
    turn); INVALID_REQUEST for what kvgate cannot serve (see :mod:`.responses_support`)."""
    responses_support.check(body)
    tools = tools_of(body)
    system = [{"role": "system", "content": body.instructions}] if body.instructions else []
    messages = render_conversation([*system, *earlier, *input_turns(body)], tools)
    constraint, param = _constraint(body, tools)
    sampling = {"temperature": body.temperature, "top_p": body.top_p, "seed": body.seed,
                "max_tokens": body.max_output_tokens, "constraint": constraint}  # fmt: skip
    return GenerateRequest(
        body.model,
        ChatInput(messages),
        sampling,
        cache_key=body.prompt_cache_key,
        constraint_param=param,
        reads_calls=readable_names(body) is not None,
    )


def input_turns(body: ResponsesRequest) -> ChatMessages:
    """This request's own input as chat turns: a string is one user turn; an assistant message and
    the function calls after it are one assistant turn; a call's output is a user turn."""
    if isinstance(body.input, str):
        return [{"role": "user", "content": body.input}]
    turns: ChatMessages = []
    pending: tuple[int, str, list[ToolCall]] | None = None  # an assistant turn still taking calls
    for i, item in enumerate(body.input):
        if isinstance(item, FunctionCallItem):
            at, content, calls = pending or (i, "", [])
            pending = (at, content, [*calls, ToolCall(item.call_id, item.name, item.arguments)])
            continue
        if pending is not None:
            turns.append(_assistant(*pending))
            pending = None
        if isinstance(item, MessageItem) and item.role == "assistant":
            pending = (i, item.text(), [])
        elif isinstance(item, MessageItem):
            turns.append(
                {"role": "system" if item.role == "developer" else item.role, "content": item.text()}
            )
        elif isinstance(item, FunctionCallOutputItem):
            turns.append(tool_result_turn(item.text()))
    if pending is not None:
        turns.append(_assistant(*pending))
    return turns


def _assistant(at: int, content: str, calls: list[ToolCall]) -> dict[str, str]:
    try:
        return assistant_turn(content, calls)
    except ValueError as exc:  # json.JSONDecodeError included
        raise invalid(f"function call arguments must be a JSON object: {exc}", f"input.{at}") from exc


def tools_of(body: ResponsesRequest) -> list[Tool]:
    """The declared functions; INVALID_REQUEST for two of one name."""
    declared = [t for t in body.tools or () if isinstance(t, FunctionTool)]
    tools = [Tool(t.name, t.description or "", t.parameters) for t in declared]
    if len({t.name for t in tools}) != len(tools):
        raise invalid("`tools` declares a function name twice", "tools")
    return tools


def choice_of(body: ResponsesRequest, tools: list[Tool]) -> ToolChoice:
    """The caller's choice (``auto`` with tools, ``none`` without); INVALID_REQUEST for a required
    call without tools, or a function that is not declared."""
    parallel, wanted = body.parallel_tool_calls is not False, body.tool_choice
    if wanted is None:
        return ToolChoice(ChoiceMode.AUTO if tools else ChoiceMode.NONE, parallel=parallel)
    if not tools and wanted not in ("none", "auto"):
        raise invalid("`tool_choice` requires a call, but no `tools` are declared", "tool_choice")
    if isinstance(wanted, str):
        return ToolChoice(ChoiceMode(wanted), parallel=parallel)
    if wanted.name not in {t.name for t in tools}:
        raise invalid(f"`tool_choice` names `{wanted.name}`, which is not among `tools`", "tool_choice")
    return ToolChoice(ChoiceMode.REQUIRED, wanted.name, parallel)


def readable_names(body: ResponsesRequest) -> frozenset[str] | None:
    """The functions whose calls are read from the answer; None when none are."""
    names = frozenset(t.name for t in body.tools or () if isinstance(t, FunctionTool))
    return names if names and body.tool_choice != "none" else None


def _constraint(body: ResponsesRequest, tools: list[Tool]) -> tuple[OutputConstraint | None, str]:
    """A required call's grammar, or ``text.format``'s; INVALID_REQUEST for both at once."""
    required = call_constraint(tools, choice_of(body, tools))
    fmt = body.text.format if body.text is not None else None
    if required is not None and isinstance(fmt, FormatJsonObject | FormatJsonSchema):
        raise invalid("a required tool call and a JSON `text.format` cannot be combined", "tool_choice")
    if required is not None:
        return required, "tools"
    if isinstance(fmt, FormatJsonObject):
        return OutputConstraint.any_json_object(), FORMAT_PARAM
    if isinstance(fmt, FormatJsonSchema):
        try:
            return OutputConstraint.json_schema(fmt.schema_), FORMAT_PARAM
        except ValueError as exc:
            raise invalid(f"the schema in `text.format` cannot be sent: {exc}", FORMAT_PARAM) from exc
    return None, FORMAT_PARAM
