"""``/v1/models``, ``/v1/chat/completions`` and ``/v1/completions``, OpenAI-compatible."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from typing import Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse, Response

from kvgate.gateway.core.request import ChatInput, GenerateRequest, PromptInput, TextInput, TokenInput
from kvgate.gateway.core.spine import RequestCore
from kvgate.gateway.core.textgen import TextDone
from kvgate.gateway.core.tools import call_constraint
from kvgate.gateway.errors import invalid
from kvgate.gateway.http_api import openai_answers as answers
from kvgate.gateway.http_api import openai_breakpoints, openai_constraints, openai_tools
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
from kvgate.gateway.http_api.streaming import CLIENT_CLOSED_REQUEST, collect_while_connected, stream_response
from kvgate.gateway.tenancy import Caller


def openai_request(body: ChatCompletionRequest | CompletionRequest, number: int = 0) -> GenerateRequest:
    """The core's request for an OpenAI chat or completion body (for a completions batch, its prompt
    ``number``); INVALID_REQUEST for a value kvgate cannot honour (see :mod:`.openai_support`)."""
    support.check(body)
    prompt: PromptInput
    constraint, constraint_param = openai_constraints.constraint_of(body)
    if isinstance(body, ChatCompletionRequest):
        tools = openai_tools.tools_of(body)
        marks = openai_breakpoints.breakpoints_of(body, tools)
        prompt = ChatInput(openai_tools.conversation(body, tools), marks, *_rendering(body))
        logprobs = (body.top_logprobs or 0) if body.logprobs else None
        required = call_constraint(tools, openai_tools.choice_of(body, tools))
        if required is not None and constraint is not None:
            raise invalid("a required tool call and a `response_format` cannot be combined", "tool_choice")
        if required is not None:
            constraint, constraint_param = required, "tools"
    else:
        text = body.prompts()[number]
        special = body.add_special_tokens is not False
        prompt = TextInput(text, special) if isinstance(text, str) else TokenInput(text)
        logprobs = body.logprobs
    scored = support.prompt_scored(body)
    return GenerateRequest(
        body.model,
        prompt,
        _sampling(body) | {"logprobs": logprobs, "prompt_logprobs": scored, "constraint": constraint},
        tuple(body.stop_list()),
        cache_key=body.prompt_cache_key,
        client_salt=body.cache_salt or "",
        constraint_param=constraint_param,
        reads_calls=isinstance(body, ChatCompletionRequest) and openai_tools.readable_names(body) is not None,
        keep_last=body.truncate_prompt_tokens if body.truncate_prompt_tokens != -1 else None,
    )


def _rendering(body: ChatCompletionRequest) -> tuple[bool, bool, tuple[tuple[str, Any], ...]]:
    """``(generation prompt, continue the final message, template variables)``, as vLLM renders a chat."""
    final = bool(body.continue_final_message)
    template_vars = tuple((body.chat_template_kwargs or {}).items())
    return body.add_generation_prompt is not False and not final, final, template_vars


def _sampling(body: ChatCompletionRequest | CompletionRequest) -> dict[str, Any]:
    return {
        "temperature": body.temperature,
        "top_p": body.top_p,
        "top_k": body.top_k,
        "min_p": body.min_p,
        "seed": body.seed,
        "max_tokens": 1 if body.limit == 0 else body.limit,  # 0 (echo): one token, dropped (prompt_only)
        "stop_token_ids": tuple(body.stop_token_ids or ()) or None,
        "ignore_eos": body.ignore_eos or None,
        "presence_penalty": body.presence_penalty,
        "frequency_penalty": body.frequency_penalty,
        "repetition_penalty": body.repetition_penalty,
        "logit_bias": _bias(body.logit_bias),
        "min_tokens": body.min_tokens,
        "n": body.n,
    }


def _bias(logit_bias: dict[str, float] | None) -> tuple[tuple[int, float], ...] | None:
    """OpenAI's ``{"token id": bias}`` as pairs; INVALID_REQUEST for a key that is not a token id."""
    if not logit_bias:
        return None
    if not all(key.isdigit() and int(key) < 2**32 for key in logit_bias):
        bad = next(key for key in logit_bias if not (key.isdigit() and int(key) < 2**32))
        raise invalid(f"`logit_bias` keys must be token ids; {bad!r} is not one", "logit_bias")
    return tuple((int(key), value) for key, value in logit_bias.items())


def _usage_wanted(body: ChatCompletionRequest | CompletionRequest) -> bool:
    return body.stream_options is not None and bool(body.stream_options.include_usage)


async def _answer(
    streams: list[answers.Events],
    body: ChatCompletionRequest | CompletionRequest,
    to_json: Callable[[list[fmt.Choice], TextDone], dict[str, Any]],
    renderer: answers.Renderer,
    request: Request,
) -> Response:
    """The whole answer as JSON, or the stream as server-sent events."""
    if not body.stream:
        answer = await collect_while_connected(answers.collect_choices(streams, body.choices), request)
        if answer is None:
            return Response(status_code=CLIENT_CLOSED_REQUEST)
        return JSONResponse(to_json(*answer))
    return await stream_response(answers.combined(streams, body.choices), renderer)  # type: ignore[arg-type]


def build_openai_router(core: RequestCore, auth: HttpAuth) -> APIRouter:
    """The OpenAI endpoints, closed over the request core (no global state)."""
    router = APIRouter(dependencies=[Depends(auth)])
    items = most_items(core.settings.limits)

    def card(name: str) -> dict[str, Any]:
        base = core.model_name
        return {"id": name, "object": "model", "created": 0, "owned_by": "kvgate", "root": base,
                "parent": None if name == base else base,
                "max_model_len": core.settings.limits.context_window}  # fmt: skip

    @router.get("/v1/models", response_model=ModelList)
    async def models() -> dict[str, Any]:
        return {"object": "list", "data": [card(name) for name in core.models.names()]}

    @router.get("/v1/models/{model_id:path}", response_model=ModelCard,
                responses=error_responses())  # fmt: skip
    async def model(model_id: str) -> dict[str, Any]:
        adapter = core.models.resolve(model_id)
        return card(f"{core.model_name}:{adapter}" if adapter else core.model_name)

    @router.post("/v1/chat/completions", response_model=None, responses=generation_responses(ChatCompletion),
                 openapi_extra=body_doc(ChatCompletionRequest))  # fmt: skip
    async def chat(
        request: Request,
        body: ChatCompletionRequest = Depends(json_body(ChatCompletionRequest, items)),  # noqa: B008
        caller: Caller = Depends(auth),  # noqa: B008
    ) -> Response:
        job = await core.prepare(with_id(openai_request(body), request), caller)
        rid, logprobs = f"chatcmpl-{job.request_id}", bool(body.logprobs)
        tools = core.call_reading(openai_tools.readable_names(body))
        render = answers.chat_renderer(rid, body.model, body.choices, _usage_wanted(body), logprobs, tools)
        to_json = functools.partial(fmt.chat_response, rid, body.model, logprobs=logprobs, tools=tools,
                                    prompt_logprobs=body.prompt_logprobs is not None)  # fmt: skip
        echo = body.messages[-1].text() if body.echo and body.messages[-1].role == "assistant" else ""
        stream = core.generate(job)
        if body.return_tokens_as_token_ids:
            stream = answers.token_ids_as_text(stream)
        return await _answer([stream], body, answers.with_echo(to_json, echo), render, request)

    @router.post("/v1/completions", response_model=None, responses=generation_responses(TextCompletion),
                 openapi_extra=body_doc(CompletionRequest))  # fmt: skip
    async def completions(
        request: Request,
        body: CompletionRequest = Depends(json_body(CompletionRequest, items)),  # noqa: B008
        caller: Caller = Depends(auth),  # noqa: B008
    ) -> Response:
        first = with_id(openai_request(body), request)
        jobs = [await core.prepare(first, caller)]
        for number in range(1, len(body.prompts())):
            again = dataclasses.replace(
                openai_request(body, number), request_id=f"{first.request_id}-{number}"
            )
            jobs.append(await core.prepare(again, caller))
        echo = [core.prompt_text(job) if body.echo else "" for job in jobs for _ in range(body.choices)]
        rid, logprobs = f"cmpl-{jobs[0].request_id}", body.logprobs is not None
        render = answers.completion_renderer(
            rid, body.model, _usage_wanted(body), logprobs, echo, body.choices
        )
        to_json = functools.partial(fmt.completion_response, rid, body.model, logprobs=logprobs, echo=echo,
                                    prompt_logprobs=body.prompt_logprobs is not None)  # fmt: skip
        streams = [core.generate(job) for job in jobs]
        if body.return_tokens_as_token_ids:
            streams = [answers.token_ids_as_text(events) for events in streams]
        if body.max_tokens == 0:  # the prompt alone (with `echo`)
            streams = [answers.prompt_only(events) for events in streams]
        return await _answer(streams, body, to_json, render, request)

    return router
