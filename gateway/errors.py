"""The gateway's domain errors: what went wrong with a request, in terms of neither HTTP nor gRPC.

Every refusal and failure a client can see is a :class:`GatewayError` of one :class:`ErrorKind`. The
fronts map kinds to their own wire form, each in one table: HTTP status and error body in
:mod:`kvgate.gateway.http_api.errors`, gRPC status code in :mod:`kvgate.gateway.grpc_api.errors`.
Subclasses (the gateway-worker link's errors in :mod:`kvgate.gateway.upstream.errors`) fix their kind
and code as class attributes.
"""

from __future__ import annotations

from enum import StrEnum


class ErrorKind(StrEnum):
    """What a client did wrong, or what the gateway could not do."""

    INVALID_REQUEST = "invalid_request"  # the request itself is wrong: fix it, don't retry as is
    UNSUPPORTED_MEDIA_TYPE = "unsupported_media_type"
    TOO_LARGE = "too_large"  # the request is larger than the gateway accepts
    TOO_SLOW = "too_slow"  # the client sent its request too slowly
    UNAUTHENTICATED = "unauthenticated"  # no key, or a key that matches no tenant
    PERMISSION_DENIED = "permission_denied"  # the tenant may not do this (a shared namespace)
    NOT_FOUND = "not_found"  # an unknown model
    RATE_LIMITED = "rate_limited"  # the tenant is past its requests per minute: retry after
    TOKENS_LIMITED = "tokens_limited"  # the request alone is more tokens than the tenant's minute
    WORKERS_BUSY = "workers_busy"  # every worker tried is at capacity: retry after
    OVERLOADED = "overloaded"  # the gateway is at its in-flight bound: retry after
    NO_WORKERS = "no_workers"  # no worker can serve now: retry after
    DEADLINE = "deadline"  # the request's deadline passed
    WORKER_FAILED = "worker_failed"  # the worker failed mid-stream: the answer is cut short
    UPSTREAM = "upstream"  # the gateway-worker link failed otherwise
    INTERNAL = "internal"  # a bug: logged, never shown in detail


class GatewayError(Exception):
    """A refused or failed request. ``message`` is for the client; ``param`` names the field at fault
    (or None); ``code`` is a stable machine-readable reason (``model_not_found``, ...) or None;
    ``retry_after_s`` a hint for retrying clients (None: do not retry as is)."""

    kind: ErrorKind = ErrorKind.INTERNAL
    code: str | None = None
    retry_after_s: float | None = None

    def __init__(
        self,
        message: str,
        kind: ErrorKind | None = None,
        *,
        param: str | None = None,
        code: str | None = None,
        retry_after_s: float | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.param = param
        if kind is not None:
            self.kind = kind
        if code is not None:
            self.code = code
        if retry_after_s is not None:
            self.retry_after_s = retry_after_s


def invalid(message: str, param: str | None = None, code: str | None = None) -> GatewayError:
    """An ``INVALID_REQUEST`` error: the client must change the request."""
    return GatewayError(message, ErrorKind.INVALID_REQUEST, param=param, code=code)
