"""Who is asking: an API key turned into a :class:`Caller`, the same for every front.

A key comes as ``Authorization: Bearer <key>`` (OpenAI) or ``x-api-key: <key>`` (Anthropic), in HTTP
headers or gRPC metadata alike. With no key ring configured, every request is the anonymous
tenant's. ``x-kvgate-cache-namespace`` opts a request into a shared cache namespace its tenant is
allowed (checked when the request is prepared).
"""

from __future__ import annotations

from collections.abc import Mapping

from kvgate.gateway.errors import ErrorKind, GatewayError
from kvgate.gateway.tenancy import ANONYMOUS, Caller, KeyRing, RateLimiter, Tenant

NAMESPACE_HEADER = "x-kvgate-cache-namespace"


def presented_key(authorization: str | None, api_key: str | None) -> str | None:
    """The key of an ``Authorization: Bearer`` header, else of ``x-api-key``."""
    if authorization:
        scheme, _, token = authorization.partition(" ")
        if scheme.lower() == "bearer" and token.strip():
            return token.strip()
    return api_key.strip() if api_key else None


def rate_limited(tenant: Tenant, wait_s: float) -> GatewayError:
    """The refusal of a tenant past its rate limit, with when to retry."""
    message = f"Rate limit reached for tenant {tenant.name!r}; retry in {wait_s:.1f} s."
    return GatewayError(message, ErrorKind.RATE_LIMITED, code="rate_limit_exceeded", retry_after_s=wait_s)


class Authenticator:
    """Owned by the composition root, shared by the fronts. With a ``limiter``, :meth:`count` counts
    each request against its tenant's rate limit as it arrives, and refuses a tenant already past it
    before anything of the request is read."""

    def __init__(self, keys: KeyRing | None, limiter: RateLimiter | None = None) -> None:
        self._keys = keys
        self._limiter = limiter

    @property
    def enabled(self) -> bool:
        return self._keys is not None

    def caller(self, key: str | None, namespace: str | None) -> Caller:
        """The caller of ``key``; UNAUTHENTICATED when keys are configured and it matches none."""
        if self._keys is None:
            return Caller(ANONYMOUS, namespace or None)
        tenant = self._keys.authenticate(key)
        if tenant is None:
            message = "Incorrect API key provided." if key else "Missing API key (Authorization: Bearer KEY)."
            raise GatewayError(message, ErrorKind.UNAUTHENTICATED, code="invalid_api_key")
        return Caller(tenant, namespace or None)

    def credentials(self, headers: Mapping[str, str]) -> Caller:
        """:meth:`caller` of a front's lower-cased headers or metadata (``authorization``,
        ``x-api-key``, ``x-kvgate-cache-namespace``)."""
        key = presented_key(headers.get("authorization"), headers.get("x-api-key"))
        return self.caller(key, headers.get(NAMESPACE_HEADER))

    def count(self, caller: Caller) -> None:
        """Counts one request of the caller's tenant, whatever becomes of it; RATE_LIMITED, with when
        to retry (and nothing counted), when the tenant has no request or token left this minute."""
        wait_s = self._limiter.count_request(caller.tenant) if self._limiter is not None else 0.0
        if wait_s > 0:
            raise rate_limited(caller.tenant, wait_s)
