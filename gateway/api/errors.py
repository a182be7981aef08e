"""OpenAI-style errors: every failure is ``{"error": {message, type, param, code}}`` with the right
status; nothing leaks a traceback."""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException

from kvgate.gateway.upstream.errors import (
    DeadlineError,
    InvalidRequestError,
    NoWorkersError,
    UpstreamError,
    WorkerFailedError,
    WorkersBusyError,
)

log = logging.getLogger(__name__)


class ApiError(Exception):
    """An error with its HTTP status and OpenAI error fields."""

    def __init__(
        self,
        status: int,
        message: str,
        type_: str = "invalid_request_error",
        param: str | None = None,
        code: str | None = None,
        retry_after_s: float | None = None,
    ) -> None:
        super().__init__(message)
        self.status, self.message, self.type, self.param, self.code = status, message, type_, param, code
        self.retry_after_s = retry_after_s

    def response(self, anthropic: bool = False) -> JSONResponse:
        """The error as JSON: OpenAI's shape, or Anthropic's for the /v1/messages endpoint."""
        headers = {"Retry-After": str(max(1, round(self.retry_after_s)))} if self.retry_after_s else None
        if anthropic:
            body = {
                "type": "error",
                "error": {"type": _ANTHROPIC_TYPES.get(self.status, "api_error"), "message": self.message},
            }
        else:
            body = {
                "error": {"message": self.message, "type": self.type, "param": self.param, "code": self.code}
            }
        return JSONResponse(body, status_code=self.status, headers=headers)


_ANTHROPIC_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    503: "overloaded_error",
}


def _anthropic(request: Request) -> bool:
    return request.url.path.startswith("/v1/messages")


def bad_request(message: str, param: str | None = None, code: str | None = None) -> ApiError:
    return ApiError(400, message, param=param, code=code)


def from_upstream(exc: UpstreamError) -> ApiError:
    """The HTTP face of a gateway-worker failure."""
    if isinstance(exc, InvalidRequestError):
        return ApiError(400, str(exc))
    if isinstance(exc, WorkersBusyError):
        return ApiError(
            429, str(exc), "rate_limit_error", code="workers_busy", retry_after_s=exc.retry_after_s
        )
    if isinstance(exc, NoWorkersError):
        return ApiError(
            503, str(exc), "service_unavailable", code="no_workers", retry_after_s=exc.retry_after_s
        )
    if isinstance(exc, DeadlineError):
        return ApiError(504, str(exc), "timeout", code="deadline_exceeded")
    if isinstance(exc, WorkerFailedError):
        return ApiError(502, str(exc), "server_error", code="worker_failed")
    return ApiError(502, str(exc), "server_error", code="upstream_error")


def _validation_message(exc: RequestValidationError) -> tuple[str, str | None]:
    first: dict[str, Any] = exc.errors()[0] if exc.errors() else {}
    where = [str(p) for p in first.get("loc", ()) if p != "body"]
    param = ".".join(where) or None
    return (
        f"{param}: {first.get('msg', 'invalid value')}" if param else first.get("msg", "invalid body")
    ), param


def install_error_handlers(app: FastAPI) -> None:
    """Every error path of ``app`` answers in the OpenAI error format."""

    @app.exception_handler(ApiError)
    async def _api(request: Request, exc: ApiError) -> JSONResponse:
        return exc.response(_anthropic(request))

    @app.exception_handler(UpstreamError)
    async def _upstream(request: Request, exc: UpstreamError) -> JSONResponse:
        return from_upstream(exc).response(_anthropic(request))

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        message, param = _validation_message(exc)
        return ApiError(400, message, param=param).response(_anthropic(request))

    @app.exception_handler(HTTPException)
    async def _http(request: Request, exc: HTTPException) -> JSONResponse:
        kind = "not_found_error" if exc.status_code == 404 else "invalid_request_error"
        return ApiError(exc.status_code, str(exc.detail), kind).response(_anthropic(request))

    @app.exception_handler(Exception)
    async def _crash(request: Request, exc: Exception) -> JSONResponse:
        log.exception("unhandled error: %s", exc)
        return ApiError(500, "internal error", "server_error").response(_anthropic(request))
