"""Errors of the gateway-worker link, typed so that each front maps them to its own status."""

from __future__ import annotations


class UpstreamError(Exception):
    """A request could not be served by any worker. ``retry_after_s`` is a hint for clients."""

    retry_after_s: float | None = None


class NoWorkersError(UpstreamError):
    """No worker is routable (none registered, all failed or quarantined)."""

    retry_after_s = 5.0


class WorkersBusyError(UpstreamError):
    """Every worker tried refused the request for load (RESOURCE_EXHAUSTED)."""

    retry_after_s = 1.0


class WorkerFailedError(UpstreamError):
    """The worker failed after it had streamed tokens: the response is cut short."""


class InvalidRequestError(UpstreamError):
    """The worker rejected the request itself (INVALID_ARGUMENT): a client error, not retried."""


class DeadlineError(UpstreamError):
    """The request's deadline passed before it finished."""
