"""Authentication of HTTP requests: a FastAPI dependency that turns the API key into a :class:`Caller`.

The key comes as ``Authorization: Bearer <key>`` (OpenAI) or ``x-api-key: <key>`` (Anthropic). With no
key ring configured, every request is the anonymous tenant's. ``x-kvgate-cache-namespace`` opts the
request into a shared cache namespace its tenant is allowed (checked when the job is prepared).
"""

from __future__ import annotations

from fastapi import Request
from starlette.datastructures import Headers

from kvgate.gateway.api.errors import ApiError
from kvgate.gateway.tenancy import ANONYMOUS, Caller, KeyRing, RateLimiter, Tenant

NAMESPACE_HEADER = "x-kvgate-cache-namespace"
_STATE_KEY = "kvgate_caller"


def rate_limited(tenant: Tenant, wait_s: float) -> ApiError:
    """The 429 of a tenant past its rate limit, with Retry-After."""
    message = f"Rate limit reached for tenant {tenant.name!r}; retry in {wait_s:.1f} s."
    return ApiError(429, message, "requests", code="rate_limit_exceeded", retry_after_s=wait_s)


def presented_key(authorization: str | None, api_key: str | None) -> str | None:
    """The key of an ``Authorization: Bearer`` header, else of ``x-api-key``."""
    if authorization:
        scheme, _, token = authorization.partition(" ")
        if scheme.lower() == "bearer" and token.strip():
            return token.strip()
    return api_key.strip() if api_key else None


class Authenticator:
    """``Depends(authenticator)`` on every endpoint that serves a tenant. With a ``limiter``, a tenant
    already past its rate limit is refused (429) here, before its prompt is tokenized."""

    def __init__(self, keys: KeyRing | None, limiter: RateLimiter | None = None) -> None:
        self._keys = keys
        self._limiter = limiter

    @property
    def enabled(self) -> bool:
        return self._keys is not None

    def caller(self, key: str | None, namespace: str | None) -> Caller:
        """The caller of ``key``; ApiError 401 when keys are configured and it matches none."""
        if self._keys is None:
            return Caller(ANONYMOUS, namespace or None)
        tenant = self._keys.authenticate(key)
        if tenant is None:
            message = "Incorrect API key provided." if key else "Missing API key (Authorization: Bearer KEY)."
            raise ApiError(401, message, code="invalid_api_key")
        return Caller(tenant, namespace or None)

    def from_headers(self, headers: Headers) -> Caller:
        """:meth:`caller` of a request's headers."""
        key = presented_key(headers.get("authorization"), headers.get("x-api-key"))
        return self.caller(key, headers.get(NAMESPACE_HEADER))

    def check_rate(self, caller: Caller) -> None:
        """429 with Retry-After when the caller's tenant has no request or token left this minute."""
        wait_s = self._limiter.wait_s(caller.tenant) if self._limiter is not None else 0.0
        if wait_s > 0:
            raise rate_limited(caller.tenant, wait_s)

    async def __call__(self, request: Request) -> Caller:
        caller = request.scope.get("state", {}).get(_STATE_KEY) or self.from_headers(request.headers)
        self.check_rate(caller)
        return caller


def remember(scope: dict, caller: Caller) -> None:
    """Keeps the caller a middleware authenticated in the request's state, for the endpoint's
    dependency (the key is then hashed and compared once per request)."""
    scope.setdefault("state", {})[_STATE_KEY] = caller
