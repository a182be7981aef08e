"""The gRPC edge of the gateway's errors: every domain error ends the call with a status and its
message. One table, ``_STATUS``."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator

import grpc

from kvgate.gateway.errors import ErrorKind, GatewayError

log = logging.getLogger(__name__)

_STATUS: dict[ErrorKind, grpc.StatusCode] = {
    ErrorKind.INVALID_REQUEST: grpc.StatusCode.INVALID_ARGUMENT,
    ErrorKind.UNSUPPORTED_MEDIA_TYPE: grpc.StatusCode.INVALID_ARGUMENT,
    ErrorKind.TOO_LARGE: grpc.StatusCode.INVALID_ARGUMENT,
    ErrorKind.TOO_SLOW: grpc.StatusCode.DEADLINE_EXCEEDED,
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
    """Ends the call with the status of any domain error raised inside; any other error is a bug:
    logged, and ended as INTERNAL without its details (they are not the client's business)."""
    try:
        yield
    except GatewayError as exc:
        await context.abort(status_of(exc), exc.message)
    except grpc.aio.AbortError:
        raise
    except Exception:
        log.exception("unhandled error in a gRPC call")
        await context.abort(grpc.StatusCode.INTERNAL, "internal error")
