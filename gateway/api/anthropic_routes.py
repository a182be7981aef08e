"""``POST /v1/messages``, Anthropic-style: cache_control breakpoints pin prefixes for their TTL class,
and usage separates cache reads from cache writes."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

from fastapi import APIRouter, Depends
from fastapi.responses import JSONResponse, StreamingResponse

from kvgate.gateway.api.anthropic_prompt import cache_hint, chat_messages
from kvgate.gateway.api.anthropic_responses import MESSAGES_RESPONSES
from kvgate.gateway.api.anthropic_schemas import MessagesRequest
from kvgate.gateway.api.auth import Authenticator
from kvgate.gateway.api.streaming import collect, stream_response
from kvgate.gateway.prepare import Generation, Preparer
from kvgate.gateway.tenancy import Caller
from kvgate.gateway.textgen import TextDelta, TextDone, TextGenerator
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


def build_anthropic_router(preparer: Preparer, generator: TextGenerator, auth: Authenticator) -> APIRouter:
    router = APIRouter()

    @router.post("/v1/messages", response_model=None, responses=MESSAGES_RESPONSES)
    async def messages(
        body: MessagesRequest, caller: Caller = Depends(auth)  # noqa: B008
    ) -> JSONResponse | StreamingResponse:
        preparer.check_model(body.model)
        rendered, breakpoints = chat_messages(body)
        full = await preparer.chat_prompt(rendered)
        marks = await asyncio.gather(
            *(preparer.chat_prompt(b.messages, generation_prompt=False) for b in breakpoints)
        )
        hint = cache_hint(full, list(marks), [b.ttl_s for b in breakpoints])
        shared = await preparer.system_prefix(caller, rendered, full)
        sampling = {
            "temperature": body.temperature,
            "top_p": body.top_p,
            "top_k": body.top_k,
            "max_tokens": body.max_tokens,
        }
        user = body.metadata.user_id if body.metadata else None
        job = preparer.job(
            Generation(
                body.model,
                sampling,
                full,
                tuple(body.stop_sequences or ()),
                cache_key=user,
                cache_hint=hint,
                shared_prefix=shared,
            ),
            caller,
        )
        mid = f"msg_{job.request_id}"
        events = generator.stream(job)
        if not body.stream:
            text, done = await collect(events)
            return JSONResponse(_message(mid, body.model, text, done, hint))
        return await stream_response(
            events, _renderer(mid, body.model, hint, job.prompt_tokens), anthropic=True
        )

    return router


def _message(mid: str, model: str, text: str, done: TextDone, hint: CacheHint | None) -> dict[str, Any]:
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


def _event(kind: str, payload: dict[str, Any]) -> bytes:
    return f"event: {kind}\ndata: {json.dumps({'type': kind} | payload, ensure_ascii=False)}\n\n".encode()


def _renderer(
    mid: str, model: str, hint: CacheHint | None, prompt_tokens: int
) -> Callable[[TextDelta | TextDone], list[bytes]]:
    state = {"started": False}

    def render(item: TextDelta | TextDone) -> list[bytes]:
        out: list[bytes] = []
        if not state["started"]:
            state["started"] = True
            start_usage = usage_json(Usage(prompt_tokens), hint, 0)
            out.append(
                _event(
                    "message_start",
                    {
                        "message": {
                            "id": mid,
                            "type": "message",
                            "role": "assistant",
                            "model": model,
                            "content": [],
                            "stop_reason": None,
                            "stop_sequence": None,
                            "usage": start_usage,
                        }
                    },
                )
            )
            out.append(
                _event("content_block_start", {"index": 0, "content_block": {"type": "text", "text": ""}})
            )
        if isinstance(item, TextDelta):
            if item.text:
                out.append(
                    _event(
                        "content_block_delta",
                        {"index": 0, "delta": {"type": "text_delta", "text": item.text}},
                    )
                )
            return out
        reason, sequence = stop_reason(item)
        out.append(_event("content_block_stop", {"index": 0}))
        out.append(
            _event(
                "message_delta",
                {
                    "delta": {"stop_reason": reason, "stop_sequence": sequence},
                    "usage": usage_json(item.usage, hint),
                },
            )
        )
        out.append(_event("message_stop", {}))
        return out

    return render
