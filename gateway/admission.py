"""The gateway's own bound on work in flight: past ``limit`` generations at once, new ones are refused
at once (503 + Retry-After; gRPC UNAVAILABLE) instead of queueing without bound.

Workers bound their queues too (RESOURCE_EXHAUSTED, tried elsewhere, then 429); this gate protects
the gateway itself (memory, tokenization threads, event loop) when clients send faster than the
whole cluster drains. Shared by the HTTP and gRPC fronts of one gateway.
"""

from __future__ import annotations

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Receive, Scope, Send

from kvgate.gateway.api.auth import Authenticator, remember
from kvgate.gateway.api.errors import ApiError, anthropic_path

GENERATION_PATHS = ("/v1/chat/completions", "/v1/completions", "/v1/messages")
RETRY_AFTER_S = 1.0


class InFlightGate:
    """A counter with a limit; event-loop only. ``refused`` counts refusals (for metrics and tests)."""

    def __init__(self, limit: int) -> None:
        if limit < 1:
            raise ValueError("limit must be >= 1")
        self.limit = limit
        self.in_flight = 0
        self.refused = 0

    def try_enter(self) -> bool:
        if self.in_flight >= self.limit:
            self.refused += 1
            return False
        self.in_flight += 1
        return True

    def leave(self) -> None:
        self.in_flight -= 1

    def overloaded(self) -> ApiError:
        return ApiError(
            503,
            f"The gateway is handling {self.limit} requests, its limit; retry shortly.",
            "server_error",
            code="overloaded",
            retry_after_s=RETRY_AFTER_S,
        )


class Admission:
    """ASGI middleware: generation requests pass ``gate`` for their whole life (a stream included).
    The key is checked first (from the headers alone), so a client without one never holds a slot."""

    def __init__(self, app: ASGIApp, gate: InFlightGate, auth: Authenticator) -> None:
        self._app = app
        self._gate = gate
        self._auth = auth

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "")
        if scope["type"] != "http" or scope.get("method") != "POST" or not path.startswith(GENERATION_PATHS):
            await self._app(scope, receive, send)
            return
        try:
            remember(scope, self._auth.from_headers(Headers(scope=scope)))  # not checked twice
        except ApiError as refused:
            await refused.response(anthropic_path(path))(scope, receive, send)
            return
        if not self._gate.try_enter():
            await self._gate.overloaded().response(anthropic_path(path))(scope, receive, send)
            return
        try:
            await self._app(scope, receive, send)
        finally:
            self._gate.leave()

