"""Request bodies read whole before the app sees them: refused over the size limit (413), cut off when
they arrive too slowly (408), each in the endpoint's error format, before any parsing.

:class:`BodyReader` does the reading (the admission middleware uses it too, so that a generation takes
an in-flight slot only once its body is complete); :class:`BodyLimit` is the middleware that applies
it to every request.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from kvgate.gateway.errors import ErrorKind, GatewayError
from kvgate.gateway.http_api.errors import anthropic_path, error_response
from kvgate.gateway.settings import HttpTimeouts

_READ = "http.request"


class ClientLeftError(Exception):
    """The client disconnected before its body was complete: there is no one to answer."""


class BodyReader:
    """Reads a request's whole body: at most ``max_bytes`` (a declared Content-Length over it is
    refused before reading), complete within ``timeouts.body_s`` plus one second per
    ``timeouts.min_body_rate`` bytes received."""

    def __init__(
        self, max_bytes: int, timeouts: HttpTimeouts, monotonic: Callable[[], float] = time.monotonic
    ) -> None:
        self._max = max_bytes
        self._timeouts = timeouts
        self._now = monotonic

    async def read(self, scope: Scope, receive: Receive) -> bytes:
        """The body. GatewayError TOO_LARGE / TOO_SLOW when refused; ClientLeftError on a disconnect."""
        declared = dict(scope.get("headers", [])).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self._max:
            raise self._too_large()
        parts: list[bytes] = []
        size, start = 0, self._now()
        while True:
            allowed = start + self._timeouts.body_s + size / self._timeouts.min_body_rate
            message = await self._next(receive, allowed - self._now())
            if message["type"] != _READ:
                raise ClientLeftError
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self._max:
                raise self._too_large()
            parts.append(chunk)
            if not message.get("more_body", False):
                return b"".join(parts)

    async def _next(self, receive: Receive, timeout_s: float) -> Message:
        try:
            async with asyncio.timeout(max(timeout_s, 0.0)):
                return await receive()
        except TimeoutError:
            rate = self._timeouts.min_body_rate
            message = f"the request body arrived too slowly (slower than {rate} bytes per second)"
            raise GatewayError(message, ErrorKind.TOO_SLOW, code="body_too_slow") from None

    def _too_large(self) -> GatewayError:
        message = f"request body is larger than {self._max} bytes"
        return GatewayError(message, ErrorKind.TOO_LARGE, code="body_too_large")


class BodyLimit:
    """ASGI middleware: every HTTP request's body is read whole by ``reader`` and replayed to the app
    in one piece; a refused one gets its error response, and nothing reaches the app."""

    def __init__(self, app: ASGIApp, reader: BodyReader) -> None:
        self._app = app
        self._reader = reader

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        body = await read_or_refuse(self._reader, scope, receive, send)
        if body is not None:
            await self._app(scope, replay(body, receive), send)


async def read_or_refuse(reader: BodyReader, scope: Scope, receive: Receive, send: Send) -> bytes | None:
    """The body of ``reader.read``; None once refused (the error response is sent; the rest of the
    body is not read) or when the client left."""
    try:
        return await reader.read(scope, receive)
    except ClientLeftError:
        return None
    except GatewayError as refused:
        await error_response(refused, anthropic_path(scope.get("path", "")))(scope, receive, send)
        return None


def replay(body: bytes, receive: Receive) -> Receive:
    """A receive that hands the app the buffered body once, then waits on the real one."""
    sent = False

    async def replayed() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": _READ, "body": body, "more_body": False}
        return await receive()

    return replayed
