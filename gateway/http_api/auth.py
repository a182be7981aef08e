"""Authentication over HTTP: a FastAPI dependency that hands each endpoint the request's caller, as
the request core authenticates it (``Authorization: Bearer`` or ``x-api-key``; see
:mod:`kvgate.gateway.core.auth`)."""

from __future__ import annotations

from fastapi import Request

from kvgate.gateway.core.spine import RequestCore
from kvgate.gateway.tenancy import Caller

_STATE_KEY = "kvgate_caller"


class HttpAuth:
    """``Depends(http_auth)`` on every endpoint that serves a tenant. Generations and dry runs were
    authenticated, and counted against their tenant's rate limit, by the admission middleware before
    their body was read; other endpoints (``/v1/models``) are authenticated here and not counted."""

    def __init__(self, core: RequestCore) -> None:
        self._core = core

    async def __call__(self, request: Request) -> Caller:
        caller = request.scope.get("state", {}).get(_STATE_KEY)
        return caller if caller is not None else self._core.authenticate(request.headers, count=False)


def remember(scope: dict, caller: Caller) -> None:
    """Keeps the caller a middleware authenticated in the request's state, for the endpoint's
    dependency (the key is then hashed and compared once per request)."""
    scope.setdefault("state", {})[_STATE_KEY] = caller
