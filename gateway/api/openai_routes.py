"""``/v1/models``, ``/v1/chat/completions`` and ``/v1/completions``, OpenAI-compatible."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi import APIRouter
from fastapi.responses import JSONResponse, StreamingResponse

from kvgate.gateway.api import openai_format as fmt
from kvgate.gateway.api.openai_schemas import ChatCompletionRequest, CompletionRequest
from kvgate.gateway.api.streaming import collect, stream_response
from kvgate.gateway.prepare import Generation, Preparer
from kvgate.gateway.textgen import TextDelta, TextDone, TextGenerator


def _sampling(body: ChatCompletionRequest | CompletionRequest, max_tokens: int | None) -> dict[str, Any]:
    return {
        "temperature": body.temperature,
        "top_p": body.top_p,
        "top_k": body.top_k,
        "seed": body.seed,
        "max_tokens": max_tokens,
        "ignore_eos": body.ignore_eos or None,
    }


def build_openai_router(preparer: Preparer, generator: TextGenerator, model_name: str) -> APIRouter:
    """The OpenAI endpoints, closed over the gateway's services (no global state)."""
    router = APIRouter()

    @router.get("/v1/models")
    async def models() -> dict[str, Any]:
        return {
            "object": "list",
            "data": [{"id": model_name, "object": "model", "created": 0, "owned_by": "kvgate"}],
        }

    @router.post("/v1/chat/completions", response_model=None)
    async def chat(body: ChatCompletionRequest) -> JSONResponse | StreamingResponse:
        preparer.check_model(body.model)
        messages = [{"role": m.role, "content": m.text()} for m in body.messages]
        ids = await preparer.chat_prompt(messages)
        job = preparer.job(
            Generation(
                body.model,
                _sampling(body, body.limit),
                ids,
                tuple(body.stop_list()),
                cache_key=body.prompt_cache_key,
            )
        )
        rid = f"chatcmpl-{job.request_id}"
        events = generator.stream(job)
        if not body.stream:
            text, done = await collect(events)
            return JSONResponse(fmt.chat_response(rid, body.model, text, done))
        usage = body.stream_options is not None and body.stream_options.include_usage
        return await stream_response(events, _chat_renderer(rid, body.model, usage))

    @router.post("/v1/completions", response_model=None)
    async def completions(body: CompletionRequest) -> JSONResponse | StreamingResponse:
        preparer.check_model(body.model)
        ids = await preparer.text_prompt(body.prompt)
        job = preparer.job(
            Generation(
                body.model,
                _sampling(body, body.max_tokens),
                ids,
                tuple(body.stop_list()),
                cache_key=body.prompt_cache_key,
            )
        )
        rid = f"cmpl-{job.request_id}"
        events = generator.stream(job)
        if not body.stream:
            text, done = await collect(events)
            return JSONResponse(fmt.completion_response(rid, body.model, text, done))
        usage = body.stream_options is not None and body.stream_options.include_usage
        return await stream_response(events, _completion_renderer(rid, body.model, usage))

    return router


Renderer = Callable[[TextDelta | TextDone], list[bytes]]


def _chat_renderer(rid: str, model: str, include_usage: bool) -> Renderer:
    started = [False]

    def render(item: TextDelta | TextDone) -> list[bytes]:
        out = []
        if not started[0]:
            started[0] = True
            out.append(fmt.sse(fmt.chat_chunk(rid, model, {"role": "assistant", "content": ""})))
        if isinstance(item, TextDelta):
            if item.text:
                out.append(fmt.sse(fmt.chat_chunk(rid, model, {"content": item.text})))
            return out
        out.append(fmt.sse(fmt.chat_chunk(rid, model, {}, item.finish_reason.value)))
        if include_usage:
            out.append(fmt.sse(fmt.usage_chunk(rid, model, "chat.completion.chunk", item.usage)))
        return out

    return render


def _completion_renderer(rid: str, model: str, include_usage: bool) -> Renderer:
    def render(item: TextDelta | TextDone) -> list[bytes]:
        if isinstance(item, TextDelta):
            return [fmt.sse(fmt.completion_chunk(rid, model, item.text))] if item.text else []
        out = [fmt.sse(fmt.completion_chunk(rid, model, "", item.finish_reason.value))]
        if include_usage:
            out.append(fmt.sse(fmt.usage_chunk(rid, model, "text_completion", item.usage)))
        return out

    return render
