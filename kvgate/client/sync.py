"""The blocking client (``grpc``'s sync API), for scripts and notebooks."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import grpc

from kvgate.client import calls
from kvgate.client.errors import KVGateError, retryable
from kvgate.client.replies import Item, Replies
from kvgate.client.results import Generation, RouteInfo
from kvgate.proto import gateway_pb2, gateway_pb2_grpc


class KVGateClient:
    """As :class:`kvgate.client.AsyncKVGateClient`, blocking. Use as ``with``."""

    def __init__(
        self,
        target: str,
        *,
        api_key: str | None = None,
        namespace: str | None = None,
        root_certificates: bytes | None = None,
        timeout_s: float = 600.0,
        retries: int = 2,
        backoff_s: float = 0.2,
    ) -> None:
        if root_certificates is None:
            self._channel = grpc.insecure_channel(target, options=calls.CHANNEL_OPTIONS)
        else:
            credentials = grpc.ssl_channel_credentials(root_certificates)
            self._channel = grpc.secure_channel(target, credentials, options=calls.CHANNEL_OPTIONS)
        self._stub = gateway_pb2_grpc.KVGatewayStub(self._channel)
        self._metadata = calls.metadata(api_key, namespace)
        self._timeout_s, self._retries, self._backoff_s = timeout_s, retries, backoff_s

    def __enter__(self) -> KVGateClient:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def close(self) -> None:
        self._channel.close()

    def stream(self, *, timeout_s: float | None = None, **request: Any) -> Iterator[Item]:
        """:class:`Chunk` s (and with ``n`` > 1 each choice's :class:`ChoiceEnd`), then one
        :class:`Generation`; see ``AsyncKVGateClient.stream``."""
        message = calls.request(**request)
        for attempt in range(self._retries + 1):
            replies = Replies()
            call = self._stub.Generate(message, timeout=timeout_s or self._timeout_s, metadata=self._metadata)
            try:
                for reply in call:
                    item = replies.item(reply)
                    if item is not None:
                        yield item
                    if isinstance(item, Generation):
                        return
                raise KVGateError(grpc.StatusCode.INTERNAL, "the stream ended without a final message")
            except grpc.RpcError as error:
                if attempt == self._retries or not retryable(error, replies.output):
                    raise KVGateError.of(error) from None
            finally:
                call.cancel()
            time.sleep(self._backoff_s * 2**attempt)

    def generate(self, **request: Any) -> Generation:
        """The whole answer of a request."""
        for item in self.stream(**request):
            if isinstance(item, Generation):
                return item
        raise KVGateError(grpc.StatusCode.INTERNAL, "no final message")

    def route(self, *, timeout_s: float | None = None, **request: Any) -> RouteInfo:
        """Where the gateway would send a request now, and why."""
        message = calls.request(**request)
        for attempt in range(self._retries + 1):
            try:
                decision = self._stub.Route(
                    message, timeout=timeout_s or self._timeout_s, metadata=self._metadata
                )
                return RouteInfo.of(decision)
            except grpc.RpcError as error:
                if attempt == self._retries or not retryable(error, False):
                    raise KVGateError.of(error) from None
            time.sleep(self._backoff_s * 2**attempt)
        raise AssertionError("unreachable")

    def models(self, *, timeout_s: float | None = None) -> list[str]:
        """The ids of the models the gateway serves."""
        try:
            reply = self._stub.ListModels(
                gateway_pb2.ListModelsRequest(), timeout=timeout_s or self._timeout_s, metadata=self._metadata
            )
        except grpc.RpcError as error:
            raise KVGateError.of(error) from None
        return [m.id for m in reply.models]
