"""OpenAI-style errors: every failure is ``{"error": {message, type, param, code}}`` with the right
status; nothing leaks a traceback."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
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

    def body(self, anthropic: bool = False) -> dict[str, Any]:
        """The error document: OpenAI's shape, or Anthropic's for the /v1/messages endpoint."""
        if anthropic:
            return {"type": "error", "error": {"type": _anthropic_type(self.status), "message": self.message}}
        return {"error": {"message": self.message, "type": self.type, "param": self.param, "code": self.code}}

    def response(self, anthropic: bool = False) -> JSONResponse:
        """The error as a JSON response with its status (and Retry-After when there is one)."""
        headers = {"Retry-After": str(max(1, round(self.retry_after_s)))} if self.retry_after_s else None
        return JSONResponse(self.body(anthropic), status_code=self.status, headers=headers)


_ANTHROPIC_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    503: "overloaded_error",
    504: "timeout_error",
}


def _anthropic_type(status: int) -> str:
    return _ANTHROPIC_TYPES.get(status, "invalid_request_error" if status < 500 else "api_error")


def anthropic_path(path: str) -> bool:
    """Whether errors on ``path`` take Anthropic's shape (the /v1/messages endpoint) or OpenAI's."""
    return path.startswith("/v1/messages")


def _anthropic(request: Request) -> bool:
    return anthropic_path(request.url.path)


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


_TYPE_TAGS = frozenset({"str", "int", "float", "bool", "list", "dict", "none"})
_NOT_AN_OBJECT = frozenset({"model_attributes_type", "model_type", "dict_type"})


def _param(loc: Sequence[Any]) -> str | None:
    """The field path of a pydantic error location, without ``body`` and union member tags
    (``messages.0.content``, not ``body.messages.0.content.function-after[...]``)."""
    parts = [str(p) for p in loc if isinstance(p, int) or (p.isidentifier() and p not in _TYPE_TAGS)]
    return ".".join(parts[1:] if parts[:1] == ["body"] else parts) or None


def _most_telling(errors: Sequence[Mapping[str, Any]]) -> Mapping[str, Any]:
    """The error to report: of those on the first failing field, the deepest. For a union (``prompt``
    is a string or a list of token ids) that is the member the value came closest to matching."""
    if not errors:
        return {}
    field = _param(errors[0].get("loc", ()))
    top = (field or "").split(".")[0]
    same = [e for e in errors if (_param(e.get("loc", ())) or "").split(".")[0] == top]
    return max(same, key=lambda e: len(e.get("loc", ())))


def invalid_body(errors: Sequence[Mapping[str, Any]], body: Any = None) -> ApiError:
    """The 400 for a body that failed parsing or validation (``errors`` as pydantic lists them), or a
    415 when ``body`` is still bytes: FastAPI parses only JSON content types."""
    if isinstance(body, bytes | bytearray):
        message = "the body must be JSON, sent with Content-Type: application/json"
        return ApiError(415, message, code="unsupported_media_type")
    first = _most_telling(errors)
    kind, param = first.get("type"), _param(first.get("loc", ()))
    if kind == "json_invalid":
        reason, at = first.get("ctx", {}).get("error", ""), first.get("loc", ("body", "?"))[-1]
        return bad_request(f"the body is not valid JSON: {reason} (at character {at})", code="invalid_json")
    if param is None and kind == "missing":
        return bad_request("the body is missing: send a JSON object")
    if param is None and kind in _NOT_AN_OBJECT:
        return bad_request("the body must be a JSON object")
    message = str(first.get("msg", "invalid value")).removeprefix("Value error, ")
    return bad_request(f"{param}: {message}" if param else message, param)


def _unreadable_body(cause: BaseException | None) -> ApiError | None:
    """The 400 for a body the JSON parser gave up on, by why it did (None: not a parse failure)."""
    if isinstance(cause, UnicodeDecodeError):
        return bad_request(f"the body is not valid UTF-8 (byte {cause.start})", code="invalid_json")
    if isinstance(cause, RecursionError):
        return bad_request("the body is nested too deeply", code="invalid_json")
    if isinstance(cause, ValueError):  # e.g. an integer of more than 4300 digits
        return bad_request(f"the body is not valid JSON: {cause}", code="invalid_json")
    return None


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
        return invalid_body(exc.errors(), exc.body).response(_anthropic(request))

    @app.exception_handler(HTTPException)
    async def _http(request: Request, exc: HTTPException) -> JSONResponse:
        unreadable = _unreadable_body(exc.__cause__)
        if unreadable is not None:  # FastAPI's "There was an error parsing the body", made specific
            return unreadable.response(_anthropic(request))
        kind = "not_found_error" if exc.status_code == 404 else "invalid_request_error"
        return ApiError(exc.status_code, str(exc.detail), kind).response(_anthropic(request))

    @app.exception_handler(Exception)
    async def _crash(request: Request, exc: Exception) -> JSONResponse:
        log.exception("unhandled error: %s", exc)
        return ApiError(500, "internal error", "server_error").response(_anthropic(request))
