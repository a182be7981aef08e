"""The asyncio client (``grpc.aio``)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import grpc

from kvgate.client import calls
from kvgate.client.errors import KVGateError, retryable
from kvgate.client.replies import Item, Replies
from kvgate.client.results import Generation, RouteInfo
from kvgate.proto import gateway_pb2, gateway_pb2_grpc


class AsyncKVGateClient:
    """One channel to a gateway (``target``: ``host:port``). ``api_key``: sent with every call;
    ``root_certificates``: PEM of the CA to verify a TLS gateway (None: plaintext); ``timeout_s``: the
    deadline of each call unless a call gives its own; ``retries``: extra attempts of a call that failed
    ``UNAVAILABLE`` before any output, ``backoff_s`` apart (doubling). Use as ``async with``."""

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
            self._channel = grpc.aio.insecure_channel(target, options=calls.CHANNEL_OPTIONS)
        else:
            credentials = grpc.ssl_channel_credentials(root_certificates=root_certificates)
            self._channel = grpc.aio.secure_channel(target, credentials, options=calls.CHANNEL_OPTIONS)
        self._stub = gateway_pb2_grpc.KVGatewayStub(self._channel)
        self._metadata = calls.metadata(api_key, namespace)
        self._timeout_s, self._retries, self._backoff_s = timeout_s, retries, backoff_s

    async def __aenter__(self) -> AsyncKVGateClient:
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.close()

    async def close(self) -> None:
        await self._channel.close()

    async def stream(self, *, timeout_s: float | None = None, **request: Any) -> AsyncIterator[Item]:
        """:class:`Chunk` s as they are generated, then one :class:`Generation` (the whole answer);
        with ``n`` > 1, each choice's chunks (``Chunk.index``) interleaved, and a :class:`ChoiceEnd`
        as each choice ends. ``request``: the arguments of :func:`kvgate.client.calls.request`
        (``prompt`` / ``messages`` / ``token_ids``, ``model``, sampling fields, ``n``, ``logprobs``,
        ``cache_salt``, ...). Breaking out of the loop cancels the request on its worker."""
        message = calls.request(**request)
        for attempt in range(self._retries + 1):
            replies = Replies()
            call = self._stub.Generate(message, timeout=timeout_s or self._timeout_s, metadata=self._metadata)
            try:
                async for reply in call:
                    item = replies.item(reply)
                    if item is not None:
                        yield item
                    if isinstance(item, Generation):
                        return
                raise KVGateError(grpc.StatusCode.INTERNAL, "the stream ended without a final message")
            except grpc.aio.AioRpcError as error:
                if attempt == self._retries or not retryable(error, replies.output):
                    raise KVGateError.of(error) from None
            finally:
                call.cancel()
            await asyncio.sleep(self._backoff_s * 2**attempt)

    async def generate(self, **request: Any) -> Generation:
        """The whole answer of a request (see :meth:`stream`)."""
        async for item in self.stream(**request):
            if isinstance(item, Generation):
                return item
        raise KVGateError(grpc.StatusCode.INTERNAL, "no final message")  # stream() raises first

    async def route(self, *, timeout_s: float | None = None, **request: Any) -> RouteInfo:
        """Where the gateway would send a request now, and why (nothing is generated)."""
        message = calls.request(**request)
        for attempt in range(self._retries + 1):
            try:
                decision = await self._stub.Route(message, timeout=timeout_s or self._timeout_s,
                                                  metadata=self._metadata)  # fmt: skip
                return RouteInfo.of(decision)
            except grpc.aio.AioRpcError as error:
                if attempt == self._retries or not retryable(error, False):
                    raise KVGateError.of(error) from None
            await asyncio.sleep(self._backoff_s * 2**attempt)
        raise AssertionError("unreachable")

    async def models(self, *, timeout_s: float | None = None) -> list[str]:
        """The ids of the models the gateway serves."""
        try:
            reply = await self._stub.ListModels(
                gateway_pb2.ListModelsRequest(), timeout=timeout_s or self._timeout_s, metadata=self._metadata
            )
        except grpc.aio.AioRpcError as error:
            raise KVGateError.of(error) from None
        return [m.id for m in reply.models]
