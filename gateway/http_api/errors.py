"""The HTTP edge of the gateway's errors: every failure is OpenAI's ``{"error": {message, type, param,
code}}`` (Anthropic's ``{"type": "error", "error": {type, message}}`` on /v1/messages) with the right
status; nothing leaks a traceback. Domain errors map through one table, ``_HTTP``."""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException

from kvgate.gateway.errors import ErrorKind, GatewayError
from kvgate.gateway.http_api.body_errors import invalid_body, unreadable_body

log = logging.getLogger(__name__)

# The one table from the gateway's domain errors to HTTP: status, OpenAI error type, Anthropic type.
_HTTP: dict[ErrorKind, tuple[int, str, str]] = {
    ErrorKind.INVALID_REQUEST: (400, "invalid_request_error", "invalid_request_error"),
    ErrorKind.UNAUTHENTICATED: (401, "invalid_request_error", "authentication_error"),
    ErrorKind.PERMISSION_DENIED: (403, "permission_error", "permission_error"),
    ErrorKind.NOT_FOUND: (404, "invalid_request_error", "not_found_error"),
    ErrorKind.TOO_LARGE: (413, "invalid_request_error", "request_too_large"),
    ErrorKind.TOO_SLOW: (408, "invalid_request_error", "invalid_request_error"),
    ErrorKind.UNSUPPORTED_MEDIA_TYPE: (415, "invalid_request_error", "invalid_request_error"),
    ErrorKind.RATE_LIMITED: (429, "requests", "rate_limit_error"),
    ErrorKind.TOKENS_LIMITED: (429, "tokens", "rate_limit_error"),
    ErrorKind.WORKERS_BUSY: (429, "rate_limit_error", "rate_limit_error"),
    ErrorKind.INTERNAL: (500, "server_error", "api_error"),
    ErrorKind.WORKER_FAILED: (502, "server_error", "api_error"),
    ErrorKind.UPSTREAM: (502, "server_error", "api_error"),
    ErrorKind.OVERLOADED: (503, "server_error", "overloaded_error"),
    ErrorKind.NO_WORKERS: (503, "service_unavailable", "overloaded_error"),
    ErrorKind.DEADLINE: (504, "timeout", "timeout_error"),
}


def http_status(error: GatewayError) -> int:
    return _HTTP[error.kind][0]


def error_body(error: GatewayError, anthropic: bool = False) -> dict[str, Any]:
    """The error document: OpenAI's shape, or Anthropic's for the /v1/messages endpoint."""
    _, openai_type, anthropic_type = _HTTP[error.kind]
    if anthropic:
        return {"type": "error", "error": {"type": anthropic_type, "message": error.message}}
    fields = {"message": error.message, "type": openai_type, "param": error.param, "code": error.code}
    return {"error": fields}


def error_response(error: GatewayError, anthropic: bool = False) -> JSONResponse:
    """The error as a JSON response with its status (and Retry-After when there is one)."""
    retry = error.retry_after_s
    headers = {"Retry-After": str(max(1, round(retry)))} if retry else None
    return JSONResponse(error_body(error, anthropic), status_code=http_status(error), headers=headers)


def anthropic_path(path: str) -> bool:
    """Whether errors on ``path`` take Anthropic's shape (the /v1/messages endpoint) or OpenAI's."""
    return path.startswith("/v1/messages")


def _framework_response(status: int, detail: str, anthropic: bool) -> JSONResponse:
    """An error the web framework raised itself (unknown path, wrong method), in the same shapes."""
    if anthropic:
        kind = "invalid_request_error" if status < 500 else "api_error"
        kind = "not_found_error" if status == 404 else kind
        return JSONResponse({"type": "error", "error": {"type": kind, "message": detail}}, status_code=status)
    kind = "not_found_error" if status == 404 else "invalid_request_error"
    return JSONResponse({"error": {"message": detail, "type": kind, "param": None, "code": None}}, status)


def install_error_handlers(app: FastAPI) -> None:
    """Every error path of ``app`` answers in the OpenAI error format (Anthropic's on /v1/messages)."""

    def anthropic(request: Request) -> bool:
        return anthropic_path(request.url.path)

    @app.exception_handler(GatewayError)
    async def _domain(request: Request, exc: GatewayError) -> JSONResponse:
        return error_response(exc, anthropic(request))

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        return error_response(invalid_body(exc.errors(), exc.body), anthropic(request))

    @app.exception_handler(HTTPException)
    async def _http(request: Request, exc: HTTPException) -> JSONResponse:
        unreadable = unreadable_body(exc.__cause__)
        if unreadable is not None:  # FastAPI's "There was an error parsing the body", made specific
            return error_response(unreadable, anthropic(request))
        return _framework_response(exc.status_code, str(exc.detail), anthropic(request))

    @app.exception_handler(Exception)
    async def _crash(request: Request, exc: Exception) -> JSONResponse:
        log.exception("unhandled error: %s", exc)
        return error_response(GatewayError("internal error", ErrorKind.INTERNAL), anthropic(request))
