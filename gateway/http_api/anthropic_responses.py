"""Response body of ``/v1/messages``, as OpenAPI documents it (the route builds it as a plain dict);
errors take Anthropic's shape there."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel

from kvgate.gateway.http_api.error_bodies import AnthropicErrorBody, error_responses
from kvgate.gateway.http_api.streaming import stream_content


class TextContent(BaseModel):
    type: Literal["text"]
    text: str


class ToolUseContent(BaseModel):
    type: Literal["tool_use"]
    id: str
    name: str
    input: dict[str, Any]


class MessageUsage(BaseModel):
    """``input_tokens`` excludes the cache reads and writes, as Anthropic counts them."""

    input_tokens: int
    cache_creation_input_tokens: int
    cache_read_input_tokens: int
    output_tokens: int


class MessageAnswer(BaseModel):
    id: str
    type: Literal["message"]
    role: Literal["assistant"]
    model: str
    content: list[TextContent | ToolUseContent]
    stop_reason: Literal["end_turn", "max_tokens", "stop_sequence", "tool_use"]
    stop_sequence: str | None
    usage: MessageUsage


_EVENTS = (
    "message_start",
    "content_block_start",
    "content_block_delta",
    "content_block_stop",
    "message_delta",
    "message_stop",
    "error",
)

MESSAGES_RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {
        "model": MessageAnswer,
        "description": "The message, or server-sent events when stream is true",
        "content": stream_content(_EVENTS),
    },
    **error_responses(AnthropicErrorBody),
}
