"""Anthropic's answer shapes: the message object, the usage split, and the stream's events."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from kvgate.gateway.core.textgen import TextDelta, TextDone
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


def message(mid: str, model: str, text: str, done: TextDone, hint: CacheHint | None) -> dict[str, Any]:
    """The whole answer of a non-streamed request."""
    reason, sequence = stop_reason(done)
    return {
        "id": mid,
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [{"type": "text", "text": text}],
        "stop_reason": reason,
        "stop_sequence": sequence,
        "usage": usage_json(done.usage, hint),
    }


def event(kind: str, payload: dict[str, Any]) -> bytes:
    """One server-sent event of Anthropic's stream (its ``type`` repeats the event's name)."""
    return f"event: {kind}\ndata: {json.dumps({'type': kind} | payload, ensure_ascii=False)}\n\n".encode()


def renderer(
    mid: str, model: str, hint: CacheHint | None, prompt_tokens: int
) -> Callable[[TextDelta | TextDone], list[bytes]]:
    """Text stream -> Anthropic's events: message_start and content_block_start before the first
    item, a content_block_delta per delta, then content_block_stop, message_delta, message_stop."""
    state = {"started": False}

    def render(item: TextDelta | TextDone) -> list[bytes]:
        out: list[bytes] = []
        if not state["started"]:
            state["started"] = True
            out += _start(mid, model, usage_json(Usage(prompt_tokens), hint, 0))
        if isinstance(item, TextDelta):
            if item.text:
                delta = {"index": 0, "delta": {"type": "text_delta", "text": item.text}}
                out.append(event("content_block_delta", delta))
            return out
        return out + _finish(item, hint)

    return render


def _start(mid: str, model: str, usage: dict[str, int]) -> list[bytes]:
    shell = {"id": mid, "type": "message", "role": "assistant", "model": model, "content": [],
             "stop_reason": None, "stop_sequence": None, "usage": usage}  # fmt: skip
    block = {"index": 0, "content_block": {"type": "text", "text": ""}}
    return [event("message_start", {"message": shell}), event("content_block_start", block)]


def _finish(done: TextDone, hint: CacheHint | None) -> list[bytes]:
    reason, sequence = stop_reason(done)
    delta = {"stop_reason": reason, "stop_sequence": sequence}
    return [
        event("content_block_stop", {"index": 0}),
        event("message_delta", {"delta": delta, "usage": usage_json(done.usage, hint)}),
        event("message_stop", {}),
    ]
