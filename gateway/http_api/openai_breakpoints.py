"""Cache breakpoints of an OpenAI chat: Anthropic's ``cache_control`` mark on a text part, as some
clients send it to OpenAI endpoints too (``{"type": "ephemeral", "ttl": "1h"}``; ``ttl`` "5m" when
not given). Each marks the conversation up to the end of its part as a prefix to keep for its TTL
class, as the Anthropic front's do (:mod:`kvgate.gateway.http_api.anthropic_prompt`); the request core
measures it in tokens and refuses more than it allows or an unknown TTL class.
"""

from __future__ import annotations

from kvgate.gateway.core.request import Breakpoint
from kvgate.gateway.core.tools import Tool
from kvgate.gateway.errors import invalid
from kvgate.gateway.http_api import openai_tools
from kvgate.gateway.http_api.openai_schemas import ChatCompletionRequest, TextPart

DEFAULT_TTL = "5m"


def breakpoints_of(body: ChatCompletionRequest, tools: list[Tool]) -> tuple[Breakpoint, ...]:
    """One breakpoint per marked text part, in prompt order (none: the body marks nothing).
    INVALID_REQUEST for a mark whose ``type`` is not ``ephemeral`` or whose ``ttl`` is not text."""
    found = []
    for i, message in enumerate(body.messages):
        parts = message.content if isinstance(message.content, list) else []
        for j, part in enumerate(parts):
            if isinstance(part, TextPart) and part.cache_control is not None:
                ttl = _ttl(part.cache_control, f"messages.{i}.content.{j}.cache_control")
                cut = message.model_copy(update={"content": parts[: j + 1]})
                prefix = body.model_copy(update={"messages": [*body.messages[:i], cut]})
                found.append(Breakpoint(openai_tools.conversation(prefix, tools), ttl))
    return tuple(found)


def _ttl(mark: dict[str, object], param: str) -> str:
    if mark.get("type", "ephemeral") != "ephemeral":
        raise invalid("`cache_control` must be of type `ephemeral`", param)
    ttl = mark.get("ttl", DEFAULT_TTL)
    if not isinstance(ttl, str):
        raise invalid('`cache_control.ttl` must be a TTL class such as "5m" or "1h"', param)
    return ttl
