"""``POST /v1/route``: where a chat or completion request would go, and why, without running it."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends
from pydantic import BaseModel

from kvgate.gateway.core.spine import RequestCore
from kvgate.gateway.http_api.auth import HttpAuth
from kvgate.gateway.http_api.error_bodies import error_responses
from kvgate.gateway.http_api.json_body import body_doc, json_body, most_items
from kvgate.gateway.http_api.openai_routes import openai_request
from kvgate.gateway.http_api.openai_schemas import ChatCompletionRequest, CompletionRequest
from kvgate.gateway.routing.types import Routed
from kvgate.gateway.tenancy import Caller
from kvgate.gateway.upstream.job import Job


class WorkerMatch(BaseModel):
    worker: str
    matched_chunks: int
    gpu_chunks: int
    cpu_chunks: int
    pending_chunks: int


class RouteExplanation(BaseModel):
    """The answer of ``explain``, as OpenAPI documents it."""

    prompt_tokens: int
    chunk_size: int
    full_chunks: int
    index_degraded: bool
    matches: list[WorkerMatch]
    chosen_worker: str
    reason: str
    predicted_cached_tokens: int
    estimated_ttft_s: float | None


_RESPONSES: dict[int | str, dict[str, Any]] = {200: {"model": RouteExplanation}, **error_responses()}


def _kind(body: Any) -> type[BaseModel]:
    """A chat body (``messages``) or a completion body (``prompt``)."""
    return ChatCompletionRequest if "messages" in body else CompletionRequest


def build_route_router(core: RequestCore, auth: HttpAuth) -> APIRouter:
    router = APIRouter()
    items = most_items(core.settings.limits)

    @router.post("/v1/route", response_model=None, responses=_RESPONSES,
                 openapi_extra=body_doc(ChatCompletionRequest, CompletionRequest))  # fmt: skip
    async def route(
        body: ChatCompletionRequest | CompletionRequest = Depends(json_body(_kind, items)),  # noqa: B008
        caller: Caller = Depends(auth),  # noqa: B008
    ) -> dict[str, Any]:
        """Same body as /v1/chat/completions (``messages``) or /v1/completions (``prompt``); the
        caller's cache namespace applies. It counts as a request against the caller's rate limit (no
        tokens are charged) and holds an in-flight slot while it runs."""
        job = await core.prepare(openai_request(body), caller, charge=False)
        return explain(job, await core.route(job), core.settings.cache.chunk_size)

    return router


def explain(job: Job, routed: Routed, chunk_size: int) -> dict[str, Any]:
    """The dry-run answer: what was matched where, what was chosen and why."""
    matches = routed.lookup.matches.values() if routed.lookup is not None else []
    decision = routed.decision
    return {
        "prompt_tokens": job.prompt_tokens,
        "chunk_size": chunk_size,
        "full_chunks": routed.num_chunks,
        "index_degraded": routed.degraded,
        "matches": [
            {
                "worker": m.worker_id,
                "matched_chunks": m.chunks,
                "gpu_chunks": m.gpu_chunks,
                "cpu_chunks": m.cpu_chunks,
                "pending_chunks": m.pending_chunks,
            }
            for m in sorted(matches, key=lambda m: (-m.chunks, m.worker_id))
        ],
        "chosen_worker": decision.worker_id,
        "reason": decision.reason.value,
        "predicted_cached_tokens": decision.predicted_cached_tokens,
        "estimated_ttft_s": decision.estimated_ttft_s,
    }
