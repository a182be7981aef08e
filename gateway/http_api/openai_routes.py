"""``/v1/models``, ``/v1/chat/completions`` and ``/v1/completions``, OpenAI-compatible."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse, Response

from kvgate.gateway.core.request import ChatInput, GenerateRequest, PromptInput, TextInput, TokenInput
from kvgate.gateway.core.spine import RequestCore
from kvgate.gateway.core.textgen import TextDelta, TextDone
from kvgate.gateway.http_api import openai_format as fmt
from kvgate.gateway.http_api import openai_support as support
from kvgate.gateway.http_api.auth import HttpAuth
from kvgate.gateway.http_api.error_bodies import error_responses
from kvgate.gateway.http_api.json_body import body_doc, json_body, most_items
from kvgate.gateway.http_api.openai_responses import (
    ChatCompletion,
    ModelCard,
    ModelList,
    TextCompletion,
    generation_responses,
)
from kvgate.gateway.http_api.openai_schemas import ChatCompletionRequest, CompletionRequest
from kvgate.gateway.http_api.request_ids import with_id
from kvgate.gateway.http_api.streaming import (
    CLIENT_CLOSED_REQUEST,
    Events,
    collect_while_connected,
    stream_response,
)
from kvgate.gateway.tenancy import Caller

Renderer = Callable[[TextDelta | TextDone], list[bytes]]


def openai_request(body: ChatCompletionRequest | CompletionRequest) -> GenerateRequest:
    """The core's request for an OpenAI chat or completion body; INVALID_REQUEST for a value kvgate
    cannot honour (see :mod:`.openai_support`)."""
    support.check(body)
    prompt: PromptInput
    if isinstance(body, ChatCompletionRequest):
        prompt = ChatInput([{"role": m.role, "content": m.text()} for m in body.messages])
    else:
        first = body.prompts()[0]
        prompt = TextInput(first) if isinstance(first, str) else TokenInput(first)
    sampling = {
        "temperature": body.temperature,
        "top_p": body.top_p,
        "top_k": body.top_k,
        "seed": body.seed,
        "max_tokens": body.limit,
        "stop_token_ids": tuple(body.stop_token_ids or ()) or None,
        "ignore_eos": body.ignore_eos or None,
    }
    return GenerateRequest(
        body.model,
        prompt,
        sampling,
        tuple(body.stop_list()),
        cache_key=body.prompt_cache_key,
        client_salt=body.cache_salt or "",
    )


async def _answer(
    events: Events,
    body: ChatCompletionRequest | CompletionRequest,
    rid: str,
    to_json: Callable[[str, str, str, TextDone], dict[str, Any]],
    renderer: Callable[[str, str, bool], Renderer],
    request: Request,
) -> Response:
    """The whole answer as JSON, or the stream as server-sent events."""
    if not body.stream:
        answer = await collect_while_connected(events, request)
        if answer is None:
            return Response(status_code=CLIENT_CLOSED_REQUEST)
        return JSONResponse(to_json(rid, body.model, *answer))
    usage = body.stream_options is not None and bool(body.stream_options.include_usage)
    return await stream_response(events, renderer(rid, body.model, usage))


def build_openai_router(core: RequestCore, auth: HttpAuth) -> APIRouter:
    """The OpenAI endpoints, closed over the request core (no global state)."""
    router = APIRouter(dependencies=[Depends(auth)])
    items = most_items(core.settings.limits)

    card = {"id": core.model_name, "object": "model", "created": 0, "owned_by": "kvgate",
            "max_model_len": core.settings.limits.context_window}  # fmt: skip

    @router.get("/v1/models", response_model=ModelList)
    async def models() -> dict[str, Any]:
        return {"object": "list", "data": [card]}

    @router.get("/v1/models/{model_id:path}", response_model=ModelCard,
                responses=error_responses())  # fmt: skip
    async def model(model_id: str) -> dict[str, Any]:
        core.check_model(model_id)
        return card

    @router.post("/v1/chat/completions", response_model=None, responses=generation_responses(ChatCompletion),
                 openapi_extra=body_doc(ChatCompletionRequest))  # fmt: skip
    async def chat(
        request: Request,
        body: ChatCompletionRequest = Depends(json_body(ChatCompletionRequest, items)),  # noqa: B008
        caller: Caller = Depends(auth),  # noqa: B008
    ) -> Response:
        job = await core.prepare(with_id(openai_request(body), request), caller)
        rid = f"chatcmpl-{job.request_id}"
        return await _answer(core.generate(job), body, rid, fmt.chat_response, _chat_renderer, request)

    @router.post("/v1/completions", response_model=None, responses=generation_responses(TextCompletion),
                 openapi_extra=body_doc(CompletionRequest))  # fmt: skip
    async def completions(
        request: Request,
        body: CompletionRequest = Depends(json_body(CompletionRequest, items)),  # noqa: B008
        caller: Caller = Depends(auth),  # noqa: B008
    ) -> Response:
        job = await core.prepare(with_id(openai_request(body), request), caller)
        rid, render = f"cmpl-{job.request_id}", _completion_renderer
        return await _answer(core.generate(job), body, rid, fmt.completion_response, render, request)

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
