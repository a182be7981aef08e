"""The in-flight bound over HTTP: an ASGI middleware that holds one of the gateway's in-flight slots
(:class:`~kvgate.gateway.core.admission.InFlightGate`) for a generation's whole life, its stream
included, and refuses with 503 + Retry-After when there is none.

In order: the key is checked from the headers (a client without one never gets its body read), the
body is read whole (within the size limit and the body timeouts), and only then is a slot taken, so
slow uploads cannot hold the slots that generations need."""

from __future__ import annotations

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Receive, Scope, Send

from kvgate.gateway.core.spine import RequestCore
from kvgate.gateway.errors import GatewayError
from kvgate.gateway.http_api.auth import remember
from kvgate.gateway.http_api.body_limit import BodyReader, read_or_refuse, replay
from kvgate.gateway.http_api.errors import anthropic_path, error_response

# Generations, and the dry run (which tokenizes and looks the index up as they do).
GENERATION_PATHS = ("/v1/chat/completions", "/v1/completions", "/v1/messages", "/v1/responses", "/v1/route")


class Admission:
    """ASGI middleware: generation requests (and dry runs) pass the gate for their whole life, once
    their key is checked and their body (read by ``reader``) is complete."""

    def __init__(self, app: ASGIApp, core: RequestCore, reader: BodyReader) -> None:
        self._app = app
        self._core = core
        self._reader = reader

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "")
        if scope["type"] != "http" or scope.get("method") != "POST" or not path.startswith(GENERATION_PATHS):
            await self._app(scope, receive, send)
            return
        try:
            remember(scope, self._core.authenticate(Headers(scope=scope)))  # counted, even if refused later
        except GatewayError as refused:
            await error_response(refused, anthropic_path(path))(scope, receive, send)
            return
        body = await read_or_refuse(self._reader, scope, receive, send)
        if body is None:
            return
        try:
            self._core.enter()
        except GatewayError as refused:
            await error_response(refused, anthropic_path(path))(scope, receive, send)
            return
        try:
            await self._app(scope, replay(body, receive), send)
        finally:
            self._core.leave()
