"""Response bodies of the OpenAI-compatible endpoints, as OpenAPI documents them.

``openai_format`` builds the answers as plain dicts (no validation on the hot path); these models state
their shape for clients and for the schemathesis test, which checks every answer against them.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel

from kvgate.gateway.http_api.error_bodies import error_responses
from kvgate.gateway.http_api.streaming import stream_content

FinishReason = Literal["stop", "length", "abort", "error"]


class PromptTokensDetails(BaseModel):
    cached_tokens: int  # leading prompt tokens whose KV the worker reused


class UsageBody(BaseModel):
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int
    prompt_tokens_details: PromptTokensDetails


class RouteInfo(BaseModel):
    """kvgate's extension: where the request ran and why."""

    worker: str
    route_reason: str
    predicted_cached_tokens: int


class AssistantMessage(BaseModel):
    role: Literal["assistant"]
    content: str


class ChatChoice(BaseModel):
    index: int
    message: AssistantMessage
    finish_reason: FinishReason
    logprobs: dict[str, Any] | None  # {"content": [{token, logprob, bytes, top_logprobs}], "refusal"}


class ChatCompletion(BaseModel):
    id: str
    object: Literal["chat.completion"]
    created: int
    model: str
    choices: list[ChatChoice]
    usage: UsageBody
    kvgate: RouteInfo


class CompletionChoice(BaseModel):
    index: int
    text: str
    finish_reason: FinishReason
    logprobs: dict[str, Any] | None  # {tokens, token_logprobs, top_logprobs, text_offset}


class TextCompletion(BaseModel):
    id: str
    object: Literal["text_completion"]
    created: int
    model: str
    choices: list[CompletionChoice]
    usage: UsageBody
    kvgate: RouteInfo


class ModelCard(BaseModel):
    id: str
    object: Literal["model"]
    created: int
    owned_by: str
    root: str  # the base model
    parent: str | None  # the base model for a LoRA adapter (``MODEL:ADAPTER``), else None
    max_model_len: int  # the context window: prompt and output tokens together


class ModelList(BaseModel):
    object: Literal["list"]
    data: list[ModelCard]


def generation_responses(answer: type[BaseModel]) -> dict[int | str, dict[str, Any]]:
    """``responses=`` of a generation endpoint: ``answer`` as JSON, or a stream when ``stream`` is
    true; an error body for every 4xx and 5xx."""
    ok = {"model": answer, "description": "The answer, or server-sent events when stream is true"}
    return {200: ok | {"content": stream_content()}, **error_responses()}
