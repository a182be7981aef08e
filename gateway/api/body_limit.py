"""Refuses request bodies over a size limit with a 413 in the OpenAI error format, before parsing."""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from kvgate.gateway.api.errors import ApiError


class BodyLimit:
    """ASGI middleware: counts body bytes as they arrive (Content-Length may be absent or false)."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self._app = app
        self._max = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        declared = dict(scope.get("headers", [])).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self._max:
            await self._refuse(scope, receive, send)
            return
        await self._app(scope, self._counting(receive), send)

    def _counting(self, receive: Receive) -> Receive:
        seen = 0

        async def counted() -> Message:
            nonlocal seen
            message = await receive()
            seen += len(message.get("body", b""))
            if seen > self._max:
                raise ApiError(413, f"request body is larger than {self._max} bytes", code="body_too_large")
            return message

        return counted

    async def _refuse(self, scope: Scope, receive: Receive, send: Send) -> None:
        error = ApiError(413, f"request body is larger than {self._max} bytes", code="body_too_large")
        await error.response()(scope, receive, send)
