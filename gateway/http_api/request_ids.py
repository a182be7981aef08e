"""Every HTTP response names its request: ``x-request-id`` (as OpenAI's API does) and, on the
Anthropic-style endpoint, ``request-id`` too. The id is assigned when the request arrives, before
anything can refuse it, so errors carry one as well; a generation's response body uses the same id
(``chatcmpl-<id>``, ``msg_<id>``), and it is the id the worker serving it logs."""

from __future__ import annotations

import dataclasses
import uuid

from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from kvgate.gateway.core.request import GenerateRequest
from kvgate.gateway.http_api.errors import anthropic_path

_STATE_KEY = "kvgate_request_id"


class RequestIds:
    """ASGI middleware (outermost): a fresh id per HTTP request, in its state and its response headers."""

    def __init__(self, app: ASGIApp) -> None:
        self._app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        request_id = uuid.uuid4().hex
        scope.setdefault("state", {})[_STATE_KEY] = request_id
        names = (
            [b"x-request-id", b"request-id"] if anthropic_path(scope.get("path", "")) else [b"x-request-id"]
        )

        async def send_with_id(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                headers.extend((name, request_id.encode()) for name in names)
                message = {**message, "headers": headers}
            await send(message)

        await self._app(scope, receive, send_with_id)


def request_id_of(request: Request) -> str | None:
    """The id :class:`RequestIds` gave ``request`` (None when it is not installed)."""
    return request.scope.get("state", {}).get(_STATE_KEY)


def with_id(generate: GenerateRequest, request: Request) -> GenerateRequest:
    """``generate`` carrying the id of the HTTP request it came in."""
    return dataclasses.replace(generate, request_id=request_id_of(request))
