"""The gRPC edge of the gateway's errors: every domain error ends the call with a status and its
message. One table, ``_STATUS``."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

import grpc

from kvgate.gateway.errors import ErrorKind, GatewayError

_STATUS: dict[ErrorKind, grpc.StatusCode] = {
    ErrorKind.INVALID_REQUEST: grpc.StatusCode.INVALID_ARGUMENT,
    ErrorKind.UNSUPPORTED_MEDIA_TYPE: grpc.StatusCode.INVALID_ARGUMENT,
    ErrorKind.TOO_LARGE: grpc.StatusCode.INVALID_ARGUMENT,
    ErrorKind.UNAUTHENTICATED: grpc.StatusCode.UNAUTHENTICATED,
    ErrorKind.PERMISSION_DENIED: grpc.StatusCode.PERMISSION_DENIED,
    ErrorKind.NOT_FOUND: grpc.StatusCode.NOT_FOUND,
    ErrorKind.RATE_LIMITED: grpc.StatusCode.RESOURCE_EXHAUSTED,
    ErrorKind.TOKENS_LIMITED: grpc.StatusCode.RESOURCE_EXHAUSTED,
    ErrorKind.WORKERS_BUSY: grpc.StatusCode.RESOURCE_EXHAUSTED,
    ErrorKind.OVERLOADED: grpc.StatusCode.UNAVAILABLE,
    ErrorKind.NO_WORKERS: grpc.StatusCode.UNAVAILABLE,
    ErrorKind.WORKER_FAILED: grpc.StatusCode.UNAVAILABLE,
    ErrorKind.UPSTREAM: grpc.StatusCode.UNAVAILABLE,
    ErrorKind.DEADLINE: grpc.StatusCode.DEADLINE_EXCEEDED,
    ErrorKind.INTERNAL: grpc.StatusCode.INTERNAL,
}


def status_of(error: GatewayError) -> grpc.StatusCode:
    return _STATUS[error.kind]


@contextlib.asynccontextmanager
async def errors_as_status(context: grpc.aio.ServicerContext) -> AsyncIterator[None]:
    """Ends the call with the status of any domain error raised inside."""
    try:
        yield
    except GatewayError as exc:
        await context.abort(status_of(exc), exc.message)
