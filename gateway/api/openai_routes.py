"""``/v1/models``, ``/v1/chat/completions`` and ``/v1/completions``, OpenAI-compatible."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from fastapi import APIRouter, Depends
from fastapi.responses import JSONResponse, StreamingResponse

from kvgate.gateway.api import openai_format as fmt
from kvgate.gateway.api.auth import Authenticator
from kvgate.gateway.api.openai_responses import (
    ChatCompletion,
    ModelList,
    TextCompletion,
    generation_responses,
)
from kvgate.gateway.api.openai_schemas import ChatCompletionRequest, CompletionRequest
from kvgate.gateway.api.streaming import Events, collect, stream_response
from kvgate.gateway.prepare import Generation, Preparer
from kvgate.gateway.tenancy import Caller
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


Renderer = Callable[[TextDelta | TextDone], list[bytes]]


def openai_generation(
    body: ChatCompletionRequest | CompletionRequest,
    ids: np.ndarray,
    max_tokens: int | None,
    shared_prefix: int | None = None,
) -> Generation:
    """The generation an OpenAI request body asks for (``shared_prefix``: see ``Generation``)."""
    return Generation(
        body.model,
        _sampling(body, max_tokens),
        ids,
        tuple(body.stop_list()),
        cache_key=body.prompt_cache_key,
        client_salt=body.cache_salt or "",
        shared_prefix=shared_prefix,
    )


async def _answer(
    events: Events,
    body: ChatCompletionRequest | CompletionRequest,
    rid: str,
    to_json: Callable[[str, str, str, TextDone], dict[str, Any]],
    renderer: Callable[[str, str, bool], Renderer],
) -> JSONResponse | StreamingResponse:
    """The whole answer as JSON, or the stream as server-sent events."""
    if not body.stream:
        text, done = await collect(events)
        return JSONResponse(to_json(rid, body.model, text, done))
    usage = body.stream_options is not None and body.stream_options.include_usage
    return await stream_response(events, renderer(rid, body.model, usage))


def build_openai_router(
    preparer: Preparer, generator: TextGenerator, model_name: str, auth: Authenticator
) -> APIRouter:
    """The OpenAI endpoints, closed over the gateway's services (no global state)."""
    router = APIRouter(dependencies=[Depends(auth)])

    @router.get("/v1/models", response_model=ModelList)
    async def models() -> dict[str, Any]:
        return {
            "object": "list",
            "data": [{"id": model_name, "object": "model", "created": 0, "owned_by": "kvgate"}],
        }

    @router.post("/v1/chat/completions", response_model=None, responses=generation_responses(ChatCompletion))
    async def chat(
        body: ChatCompletionRequest, caller: Caller = Depends(auth)  # noqa: B008
    ) -> JSONResponse | StreamingResponse:
        preparer.check_model(body.model)
        messages = [{"role": m.role, "content": m.text()} for m in body.messages]
        ids = await preparer.chat_prompt(messages)
        shared = await preparer.system_prefix(caller, messages, ids)
        job = preparer.job(openai_generation(body, ids, body.limit, shared), caller)
        return await _answer(
            generator.stream(job), body, f"chatcmpl-{job.request_id}", fmt.chat_response, _chat_renderer
        )

    @router.post("/v1/completions", response_model=None, responses=generation_responses(TextCompletion))
    async def completions(
        body: CompletionRequest, caller: Caller = Depends(auth)  # noqa: B008
    ) -> JSONResponse | StreamingResponse:
        preparer.check_model(body.model)
        ids = await preparer.text_prompt(body.prompt)
        job = preparer.job(openai_generation(body, ids, body.max_tokens), caller)
        return await _answer(
            generator.stream(job),
            body,
            f"cmpl-{job.request_id}",
            fmt.completion_response,
            _completion_renderer,
        )

    return router


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
