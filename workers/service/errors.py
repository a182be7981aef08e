"""Why the worker service refuses or fails a request; the servicer maps each to a gRPC status."""

from __future__ import annotations


class ServiceError(Exception):
    """Base of the worker service's own errors."""


class EngineUnavailableError(ServiceError):
    """The engine broke (a step raised) or the worker is shutting down: nothing more runs here."""


class AdmissionFullError(ServiceError):
    """The worker holds as many requests as it admits; the gateway should try another worker."""


class DuplicateRequestError(ServiceError):
    """A request with the same id is still in flight on this worker."""
