"""OpenAI response shapes (dicts), built from the gateway's text stream."""

from __future__ import annotations

import json
import time
from typing import Any

from kvgate.gateway.core.textgen import TextDone
from kvgate.proto.sampling import Usage


def usage_json(usage: Usage) -> dict[str, Any]:
    return {
        "prompt_tokens": usage.prompt_tokens,
        "completion_tokens": usage.completion_tokens,
        "total_tokens": usage.prompt_tokens + usage.completion_tokens,
        "prompt_tokens_details": {"cached_tokens": usage.cached_tokens},
    }


def route_json(done: TextDone) -> dict[str, Any]:
    """kvgate's extension: where the request ran and why (clients that do not know it ignore it)."""
    decision = done.routed.decision
    return {
        "worker": decision.worker_id,
        "route_reason": decision.reason.value,
        "predicted_cached_tokens": decision.predicted_cached_tokens,
    }


def chat_response(rid: str, model: str, text: str, done: TextDone) -> dict[str, Any]:
    return {
        "id": rid,
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": text},
                "finish_reason": done.finish_reason.value,
                "logprobs": None,
            }
        ],
        "usage": usage_json(done.usage),
        "kvgate": route_json(done),
    }


def completion_response(rid: str, model: str, text: str, done: TextDone) -> dict[str, Any]:
    return {
        "id": rid,
        "object": "text_completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "text": text, "finish_reason": done.finish_reason.value, "logprobs": None}],
        "usage": usage_json(done.usage),
        "kvgate": route_json(done),
    }


def chat_chunk(rid: str, model: str, delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    choice = {"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}
    return {
        "id": rid,
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": model,
        "choices": [choice],
    }


def completion_chunk(rid: str, model: str, text: str, finish: str | None = None) -> dict[str, Any]:
    choice = {"index": 0, "text": text, "finish_reason": finish, "logprobs": None}
    return {
        "id": rid,
        "object": "text_completion",
        "created": int(time.time()),
        "model": model,
        "choices": [choice],
    }


def usage_chunk(rid: str, model: str, obj: str, usage: Usage) -> dict[str, Any]:
    return {
        "id": rid,
        "object": obj,
        "created": int(time.time()),
        "model": model,
        "choices": [],
        "usage": usage_json(usage),
    }


def sse(payload: dict[str, Any] | str) -> bytes:
    """One server-sent event."""
    data = payload if isinstance(payload, str) else json.dumps(payload, ensure_ascii=False)
    return f"data: {data}\n\n".encode()
