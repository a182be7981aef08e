"""Refuses request bodies over a size limit with a 413 in the endpoint's error format, before parsing."""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from kvgate.gateway.errors import ErrorKind, GatewayError
from kvgate.gateway.http_api.errors import anthropic_path, error_response


class BodyLimit:
    """ASGI middleware. A declared Content-Length over the limit is refused at once; a body without one
    (chunked) is read up to the limit first and replayed to the app, or refused when it is larger."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self._app = app
        self._max = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        declared = dict(scope.get("headers", [])).get(b"content-length")
        if declared is not None and declared.isdigit():
            if int(declared) > self._max:
                await self._refuse(scope, receive, send)
                return
            await self._app(scope, receive, send)
            return
        body = await self._read(receive)
        if body is None:
            await self._refuse(scope, receive, send)
            return
        await self._app(scope, _replay(body, receive), send)

    async def _read(self, receive: Receive) -> bytes | None:
        """The whole body, or None as soon as it passes the limit."""
        parts: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return b"".join(parts)  # the client left; the app sees the disconnect
            size += len(message.get("body", b""))
            if size > self._max:
                return None
            parts.append(message.get("body", b""))
            if not message.get("more_body", False):
                return b"".join(parts)

    async def _refuse(self, scope: Scope, receive: Receive, send: Send) -> None:
        message = f"request body is larger than {self._max} bytes"
        error = GatewayError(message, ErrorKind.TOO_LARGE, code="body_too_large")
        await error_response(error, anthropic_path(scope.get("path", "")))(scope, receive, send)


def _replay(body: bytes, receive: Receive) -> Receive:
    """A receive that hands the app the buffered body once, then waits on the real one."""
    sent = False

    async def replayed() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replayed
