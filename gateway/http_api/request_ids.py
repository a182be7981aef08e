"""Every HTTP response names its request: ``x-request-id`` (as OpenAI's API does) and, on the
Anthropic-style endpoint, ``request-id`` too. The id is assigned when the request arrives, before
anything can refuse it, so errors carry one as well; a generation's response body uses the same id
(``chatcmpl-<id>``, ``msg_<id>``), and it is the id the worker serving it logs and the key of its
diagnosis (``GET /v1/cache/diagnose/{id}``). The id is always the gateway's own, 122 random bits: a
client's ``x-client-request-id`` (OpenAI's name; at most 512 printable ASCII characters) is echoed in
the response's ``x-client-request-id`` and used for nothing else."""

from __future__ import annotations

import dataclasses
import uuid

from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from kvgate.gateway.core.request import GenerateRequest
from kvgate.gateway.http_api.errors import anthropic_path

_STATE_KEY = "kvgate_request_id"
CLIENT_ID_HEADER = b"x-client-request-id"
MAX_CLIENT_ID_CHARS = 512


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
        added = [(name, request_id.encode()) for name in names]
        client_id = _client_id(scope)
        if client_id is not None:
            added.append((CLIENT_ID_HEADER, client_id))

        async def send_with_id(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                headers.extend(added)
                message = {**message, "headers": headers}
            await send(message)

        await self._app(scope, receive, send_with_id)


def _client_id(scope: Scope) -> bytes | None:
    """The client's own ``x-client-request-id``, when it is one to echo (else None)."""
    for name, value in scope.get("headers", []):
        if name == CLIENT_ID_HEADER:
            ok = 0 < len(value) <= MAX_CLIENT_ID_CHARS and all(32 <= b < 127 for b in value)
            return value if ok else None
    return None


def request_id_of(request: Request) -> str | None:
    """The id :class:`RequestIds` gave ``request`` (None when it is not installed)."""
    return request.scope.get("state", {}).get(_STATE_KEY)


def with_id(generate: GenerateRequest, request: Request) -> GenerateRequest:
    """``generate`` carrying the id of the HTTP request it came in."""
    return dataclasses.replace(generate, request_id=request_id_of(request))
