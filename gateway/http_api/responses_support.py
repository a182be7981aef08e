"""What ``/v1/responses`` does with the fields it parses but does not act on: accepted
(:data:`IGNORED`: none of them changes the output), or refused for the values it cannot honour
(:func:`check`), in a sentence naming the field, as :mod:`.openai_support` does for chat completions.
docs/OPENAI.md lists the same."""

from __future__ import annotations

from kvgate.gateway.errors import invalid
from kvgate.gateway.http_api.responses_schemas import (
    MessageItem,
    OtherChoice,
    OtherItem,
    OtherPart,
    OtherTool,
    ResponsesRequest,
)

IGNORED = ("metadata", "user", "safety_identifier", "service_tier", "prompt_cache_retention", "reasoning",
           "include", "truncation", "text.verbosity", "stream_options.include_obfuscation")  # fmt: skip

_NOT_HERE = "not supported by this server"


def check(body: ResponsesRequest) -> None:
    """Raises INVALID_REQUEST (``param`` naming the field) for the first value kvgate cannot honour."""
    _check_options(body)
    _check_tools(body)
    if isinstance(body.input, list):
        _check_items(body.input)


def _check_options(body: ResponsesRequest) -> None:
    if body.background:
        raise invalid(f"`background` responses are {_NOT_HERE}", "background")
    if body.conversation is not None:
        raise invalid("`conversation` objects are not supported by this server: continue a conversation "
                      "with `previous_response_id`", "conversation")  # fmt: skip
    if body.prompt is not None:
        raise invalid(f"reusable prompt templates (`prompt`) are {_NOT_HERE}", "prompt")
    if body.max_tool_calls is not None:
        raise invalid(f"`max_tool_calls` is {_NOT_HERE}", "max_tool_calls")
    if body.top_logprobs:
        raise invalid(
            f"`top_logprobs` on /v1/responses is {_NOT_HERE} (chat completions has them)", "top_logprobs"
        )
    if isinstance(body.input, list) and not body.input:
        raise invalid("`input` must not be an empty list", "input")


def _check_tools(body: ResponsesRequest) -> None:
    for i, tool in enumerate(body.tools or ()):
        if isinstance(tool, OtherTool):
            raise invalid(f"`{tool.type}` tools are {_NOT_HERE}: declare functions (`type: function`)",
                          f"tools.{i}")  # fmt: skip
    if isinstance(body.tool_choice, OtherChoice):
        kind = body.tool_choice.type
        raise invalid(f"a `tool_choice` of type `{kind}` is {_NOT_HERE}: use `none`, `auto`, `required` or a "
                      "function", "tool_choice")  # fmt: skip


def _check_items(items: list) -> None:
    for i, item in enumerate(items):
        if isinstance(item, OtherItem):
            raise invalid(f"input items of type `{item.type}` are {_NOT_HERE}", f"input.{i}")
        parts = item.content if isinstance(item, MessageItem) else getattr(item, "output", None)
        for j, part in enumerate(parts if isinstance(parts, list) else ()):
            if isinstance(part, OtherPart):
                field = "content" if isinstance(item, MessageItem) else "output"
                raise invalid(
                    f"`{part.type}` content is {_NOT_HERE} (its model reads text)", f"input.{i}.{field}.{j}"
                )
