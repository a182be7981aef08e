"""Why the worker service refuses or fails a request; the servicer maps each to a gRPC status."""

from __future__ import annotations


class ServiceError(Exception):
    """Base of the worker service's own errors."""


class EngineUnavailableError(ServiceError):
    """The engine broke (a step raised) or the worker is shutting down: nothing more runs here."""


class EngineStalledError(ServiceError):
    """The engine held requests but finished no step for ``stall_timeout_s`` (a hung kernel, a
    deadlock): the worker gives up on them and reports itself broken, so it is restarted."""


class AdmissionFullError(ServiceError):
    """The worker holds as many requests as it admits; the gateway should try another worker."""


class DuplicateRequestError(ServiceError):
    """A request with the same id is still in flight on this worker."""
