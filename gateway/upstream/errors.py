"""Errors of the gateway-worker link: :class:`~kvgate.gateway.errors.GatewayError` subclasses whose
kind and code are fixed, so that each front maps them like any other domain error."""

from __future__ import annotations

from kvgate.gateway.errors import ErrorKind, GatewayError


class UpstreamError(GatewayError):
    """A request could not be served by any worker. ``retry_after_s`` is a hint for clients."""

    kind = ErrorKind.UPSTREAM
    code = "upstream_error"


class NoWorkersError(UpstreamError):
    """No worker is routable (none registered, all failed or quarantined)."""

    kind = ErrorKind.NO_WORKERS
    code = "no_workers"
    retry_after_s = 5.0


class WorkersBusyError(UpstreamError):
    """Every worker tried refused the request for load (RESOURCE_EXHAUSTED)."""

    kind = ErrorKind.WORKERS_BUSY
    code = "workers_busy"
    retry_after_s = 1.0


class WorkerFailedError(UpstreamError):
    """The worker failed after it had streamed tokens: the response is cut short."""

    kind = ErrorKind.WORKER_FAILED
    code = "worker_failed"


class InvalidRequestError(UpstreamError):
    """The worker rejected the request itself (INVALID_ARGUMENT): a client error, not retried."""

    kind = ErrorKind.INVALID_REQUEST
    code = None


class DeadlineError(UpstreamError):
    """The request's deadline passed before it finished."""

    kind = ErrorKind.DEADLINE
    code = "deadline_exceeded"
