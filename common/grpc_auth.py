"""The deployment's call token on the gateway-worker gRPC link (:mod:`kvgate.proto.trust`).

:func:`token_interceptors` are a caller's channel interceptors: every call carries the token.
:class:`RequireToken` is a worker server's interceptor: a call to a protected service without the
token ends with UNAUTHENTICATED before any handler runs. Health checks (``grpc.health.v1``) stay open,
so orchestrators can probe a worker without the secret.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import grpc

from kvgate.proto.trust import CALL_TOKEN_HEADER, call_token, token_matches

_Continuation = Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler | None]]


class _AddToken:
    """Adds the token to a call's metadata (one class serves all four call shapes)."""

    def __init__(self, token: str) -> None:
        self._pair = (CALL_TOKEN_HEADER, token)

    def _details(self, details: grpc.aio.ClientCallDetails) -> grpc.aio.ClientCallDetails:
        metadata = grpc.aio.Metadata(*(details.metadata or ()), self._pair)
        return grpc.aio.ClientCallDetails(
            details.method, details.timeout, metadata, details.credentials, details.wait_for_ready
        )

    async def intercept_unary_unary(self, continuation: Any, details: Any, request: Any) -> Any:
        return await continuation(self._details(details), request)

    async def intercept_unary_stream(self, continuation: Any, details: Any, request: Any) -> Any:
        return await continuation(self._details(details), request)


class _UnaryUnary(_AddToken, grpc.aio.UnaryUnaryClientInterceptor):
    pass


class _UnaryStream(_AddToken, grpc.aio.UnaryStreamClientInterceptor):
    pass


def token_interceptors(secret: bytes) -> list[grpc.aio.ClientInterceptor]:
    """The interceptors a channel to the deployment's workers needs (none without a secret)."""
    token = call_token(secret)
    return [] if token is None else [_UnaryUnary(token), _UnaryStream(token)]


class RequireToken(grpc.aio.ServerInterceptor):
    """Refuses calls to ``services`` (full names, e.g. ``kvgate.v1.KVWorker``) that do not carry the
    token of ``secret``; without a secret, lets every call through."""

    def __init__(self, secret: bytes, services: Sequence[str]) -> None:
        self._secret = secret
        self._prefixes = tuple(f"/{name}/" for name in services)

    async def intercept_service(
        self, continuation: _Continuation, details: grpc.HandlerCallDetails
    ) -> grpc.RpcMethodHandler | None:
        handler = await continuation(details)
        if handler is None or not self._secret or not details.method.startswith(self._prefixes):
            return handler
        presented = dict(details.invocation_metadata or ()).get(CALL_TOKEN_HEADER)
        if token_matches(presented, self._secret):
            return handler
        return _refusal(handler)


_REFUSAL = "this worker serves only its deployment's gateways (missing or wrong call token)"


def _refusal(handler: grpc.RpcMethodHandler) -> grpc.RpcMethodHandler:
    """A handler of ``handler``'s shape that ends the call with UNAUTHENTICATED."""

    async def refuse(_request: Any, context: grpc.aio.ServicerContext) -> None:
        await context.abort(grpc.StatusCode.UNAUTHENTICATED, _REFUSAL)

    codec = {
        "request_deserializer": handler.request_deserializer,
        "response_serializer": handler.response_serializer,
    }
    if handler.request_streaming and handler.response_streaming:
        return grpc.stream_stream_rpc_method_handler(refuse, **codec)
    if handler.request_streaming:
        return grpc.stream_unary_rpc_method_handler(refuse, **codec)
    if handler.response_streaming:
        return grpc.unary_stream_rpc_method_handler(refuse, **codec)
    return grpc.unary_unary_rpc_method_handler(refuse, **codec)
