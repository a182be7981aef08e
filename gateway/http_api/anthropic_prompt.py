"""Anthropic messages -> the core's chat input: chat-template messages and cache breakpoints.

A ``cache_control`` breakpoint on a block marks the prompt up to the end of that block as a prefix to
keep for the breakpoint's TTL class. The core measures it in tokens (the common prefix of the full
prompt and the conversation rendered only up to that block: :mod:`kvgate.gateway.core.prompts`).
Tools are rendered into the system message (:mod:`kvgate.gateway.core.tools`), so a breakpoint on a
tool keeps the system message, tools included, cached.
"""

from __future__ import annotations

from kvgate.gateway.core.request import Breakpoint, ChatInput, ChatMessages, GenerateRequest
from kvgate.gateway.core.tools import Tool, call_constraint, render_conversation
from kvgate.gateway.http_api import anthropic_tools
from kvgate.gateway.http_api.anthropic_schemas import MessagesRequest


def anthropic_request(body: MessagesRequest) -> GenerateRequest:
    """The core's request for a ``/v1/messages`` body; INVALID_REQUEST for tools it cannot use."""
    tools = anthropic_tools.tools_of(body)
    rendered, breakpoints = chat_messages(body, tools)
    sampling = {"temperature": body.temperature, "top_p": body.top_p, "top_k": body.top_k,
                "max_tokens": body.max_tokens,
                "constraint": call_constraint(tools, anthropic_tools.choice_of(body, tools))}  # fmt: skip
    return GenerateRequest(
        body.model,
        ChatInput(rendered, tuple(breakpoints)),
        sampling,
        tuple(body.stop_sequences or ()),
        cache_key=body.prompt_cache_key,
        constraint_param="tools",
        reads_calls=anthropic_tools.readable_names(body) is not None,
    )


def chat_messages(
    body: MessagesRequest, tools: list[Tool] | None = None
) -> tuple[ChatMessages, list[Breakpoint]]:
    """The messages to render (``tools`` declared in the system message) and every cache breakpoint,
    in prompt order."""
    tools = tools or []
    turns = [("system", body.system_blocks())] if body.system is not None else []
    turns += [(m.role, m.blocks()) for m in body.messages]
    breakpoints: list[Breakpoint] = []
    marked = [t.cache_control for t in body.tools or () if t.cache_control is not None]
    if marked:  # the tools end the system message: the breakpoint keeps it, tools included
        system = _turns(*turns[0]) if body.system is not None else []
        breakpoints.append(Breakpoint(render_conversation(system, tools), marked[-1].ttl))
    done: ChatMessages = []
    for role, blocks in turns:
        for i, block in enumerate(blocks):
            if block.cache_control is not None:
                partial = [*done, *_turns(role, blocks[: i + 1])]
                breakpoints.append(Breakpoint(render_conversation(partial, tools), block.cache_control.ttl))
        done += _turns(role, blocks)
    return render_conversation(done, tools), breakpoints


def _turns(role: str, blocks: list) -> ChatMessages:
    if role == "system":
        return [{"role": "system", "content": "".join(b.text for b in blocks)}]
    return anthropic_tools.turns(role, blocks)
