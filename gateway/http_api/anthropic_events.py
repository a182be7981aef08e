"""Anthropic's answer shapes: the message object, the usage split, and the stream's events."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from kvgate.gateway.core.call_formats import CallReading
from kvgate.gateway.core.textgen import TextDelta, TextDone
from kvgate.gateway.http_api.anthropic_tool_events import ToolBlocks
from kvgate.gateway.http_api.anthropic_tools import tool_use_json
from kvgate.proto.sampling import CacheHint, FinishReason, Usage

_STOP_REASONS = {FinishReason.STOP: "end_turn", FinishReason.LENGTH: "max_tokens"}


def usage_json(usage: Usage, hint: CacheHint | None, output_tokens: int | None = None) -> dict[str, int]:
    """Anthropic's split: reads came from cache, writes are breakpoint tokens newly cached."""
    read = usage.cached_tokens
    written = max(0, hint.pinned_prefix_tokens - read) if hint is not None else 0
    return {
        "input_tokens": usage.prompt_tokens - read - written,
        "cache_creation_input_tokens": written,
        "cache_read_input_tokens": read,
        "output_tokens": usage.completion_tokens if output_tokens is None else output_tokens,
    }


def stop_reason(done: TextDone) -> tuple[str, str | None]:
    """Anthropic's stop_reason and stop_sequence of a finished generation."""
    if done.matched_stop is not None:
        return "stop_sequence", done.matched_stop
    return _STOP_REASONS.get(done.finish_reason, "end_turn"), None


def message(
    mid: str, model: str, text: str, done: TextDone, hint: CacheHint | None,
    tools: CallReading | None = None,
) -> dict[str, Any]:  # fmt: skip
    """The whole answer of a non-streamed request; ``tools``: how the calls are read from it (None:
    none are), each a ``tool_use`` block (then ``stop_reason`` is ``tool_use``). The calls are read as
    the stream reads them (``CallReading.split``: in the Hermes form a call cut off by the token limit
    is one, its ``input`` what was complete), so a streamed ``tool_use`` block's fragments are the text
    of this ``input``."""
    reason, sequence = stop_reason(done)
    content: list[dict[str, Any]] = [{"type": "text", "text": text}]
    if tools is not None:
        words, calls = tools.split(text)  # as the stream reads it
        content = [{"type": "text", "text": words}] if words or not calls else []
        content += [tool_use_json(call) for call in calls]
        reason = "tool_use" if calls and reason == "end_turn" else reason
    return {
        "id": mid,
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": reason,
        "stop_sequence": sequence,
        "usage": usage_json(done.usage, hint),
    }


def event(kind: str, payload: dict[str, Any]) -> bytes:
    """One server-sent event of Anthropic's stream (its ``type`` repeats the event's name)."""
    return f"event: {kind}\ndata: {json.dumps({'type': kind} | payload, ensure_ascii=False)}\n\n".encode()


def renderer(
    mid: str, model: str, hint: CacheHint | None, prompt_tokens: int, tools: CallReading | None = None
) -> Callable[[TextDelta | TextDone], list[bytes]]:
    """Text stream -> Anthropic's events: message_start and content_block_start before the first
    item, a content_block_delta per delta, then content_block_stop, message_delta, message_stop. With
    ``tools`` (how calls are read), each call is a ``tool_use`` block (see
    :class:`ToolBlocks`) and a stream that called stops with ``tool_use``."""
    state = {"started": False}
    blocks = None if tools is None else ToolBlocks(tools, event)

    def render(item: TextDelta | TextDone) -> list[bytes]:
        out: list[bytes] = []
        if not state["started"]:
            state["started"] = True
            out += _start(mid, model, usage_json(Usage(prompt_tokens), hint, 0))
        if isinstance(item, TextDelta):
            if blocks is not None:
                return out + blocks.text(item.text)
            if item.text:
                delta = {"index": 0, "delta": {"type": "text_delta", "text": item.text}}
                out.append(event("content_block_delta", delta))
            return out
        if blocks is None:
            return [*out, event("content_block_stop", {"index": 0}), *_finish(item, hint)]
        return out + blocks.end() + _finish(item, hint, blocks.called)

    return render


def _start(mid: str, model: str, usage: dict[str, int]) -> list[bytes]:
    shell = {"id": mid, "type": "message", "role": "assistant", "model": model, "content": [],
             "stop_reason": None, "stop_sequence": None, "usage": usage}  # fmt: skip
    block = {"index": 0, "content_block": {"type": "text", "text": ""}}
    return [event("message_start", {"message": shell}), event("content_block_start", block)]


def _finish(done: TextDone, hint: CacheHint | None, called: bool = False) -> list[bytes]:
    reason, sequence = stop_reason(done)
    reason = "tool_use" if called and reason == "end_turn" else reason
    delta = {"stop_reason": reason, "stop_sequence": sequence}
    return [
        event("message_delta", {"delta": delta, "usage": usage_json(done.usage, hint)}),
        event("message_stop", {}),
    ]
