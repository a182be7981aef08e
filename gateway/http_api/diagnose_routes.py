"""``GET /v1/cache/diagnose/{request_id}``: why one of the caller's requests reused the cached tokens
it did, and how to reuse more (see ``docs/CACHING.md``)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends
from pydantic import BaseModel

from kvgate.gateway.core.spine import RequestCore
from kvgate.gateway.http_api.auth import HttpAuth
from kvgate.gateway.http_api.error_bodies import error_responses
from kvgate.gateway.tenancy import Caller


class CacheDiagnosis(BaseModel):
    """The answer, as OpenAPI documents it."""

    request_id: str
    prompt_tokens: int
    cached_tokens: int
    first_divergent_token: int | None
    cause: str
    detail: str
    evidence: dict[str, Any]


_RESPONSES: dict[int | str, dict[str, Any]] = {200: {"model": CacheDiagnosis}, **error_responses()}


def build_diagnose_router(core: RequestCore, auth: HttpAuth) -> APIRouter:
    router = APIRouter()

    @router.get("/v1/cache/diagnose/{request_id}", response_model=None, responses=_RESPONSES)
    async def diagnose(request_id: str, caller: Caller = Depends(auth)) -> dict[str, Any]:  # noqa: B008
        """The diagnosis of a request this caller's tenant made (its ``x-request-id``); 404 for any
        other id, another tenant's included."""
        return core.diagnosis(caller, request_id)

    return router
