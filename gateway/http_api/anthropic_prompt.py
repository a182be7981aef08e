"""Anthropic messages -> the core's chat input: chat-template messages and cache breakpoints.

A ``cache_control`` breakpoint on a block marks the prompt up to the end of that block as a prefix to
keep for the breakpoint's TTL class. The core measures it in tokens (the common prefix of the full
prompt and the conversation rendered only up to that block: :mod:`kvgate.gateway.core.prompts`).
"""

from __future__ import annotations

from kvgate.gateway.core.request import Breakpoint, ChatInput, ChatMessages, GenerateRequest
from kvgate.gateway.http_api.anthropic_schemas import MessagesRequest, TextBlock


def anthropic_request(body: MessagesRequest) -> GenerateRequest:
    """The core's request for a ``/v1/messages`` body."""
    rendered, breakpoints = chat_messages(body)
    sampling = {"temperature": body.temperature, "top_p": body.top_p, "top_k": body.top_k,
                "max_tokens": body.max_tokens}  # fmt: skip
    return GenerateRequest(
        body.model,
        ChatInput(rendered, tuple(breakpoints)),
        sampling,
        tuple(body.stop_sequences or ()),
        cache_key=body.prompt_cache_key,
    )


def chat_messages(body: MessagesRequest) -> tuple[ChatMessages, list[Breakpoint]]:
    """The messages to render and every cache breakpoint, in prompt order."""
    rendered: ChatMessages = []
    breakpoints: list[Breakpoint] = []
    turns = [("system", body.system_blocks())] if body.system is not None else []
    turns += [(m.role, m.blocks()) for m in body.messages]
    for role, blocks in turns:
        for i, block in enumerate(blocks):
            if block.cache_control is not None:
                partial = [*rendered, {"role": role, "content": _join(blocks[: i + 1])}]
                breakpoints.append(Breakpoint(partial, block.cache_control.ttl))
        rendered.append({"role": role, "content": _join(blocks)})
    return rendered, breakpoints


def _join(blocks: list[TextBlock]) -> str:
    return "".join(b.text for b in blocks)
