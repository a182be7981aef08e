"""The public gRPC service (``KVGateway``) for gRPC clients: same semantics as the HTTP API, over
the same request core.

Deadlines: the call's deadline bounds the request (and is passed on to the worker). Cancellation:
when the client cancels, the handler is cancelled and the worker's sequence aborted with it.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

import grpc

from kvgate.gateway.core.spine import RequestCore
from kvgate.gateway.grpc_api import translate
from kvgate.gateway.grpc_api.errors import errors_as_status
from kvgate.proto import gateway_pb2, gateway_pb2_grpc

# Metadata of Generate (initial and trailing) and Route (trailing): the gateway's own id of the request,
# the key of its diagnosis; a client's own request_id (echoed in Final.request_id) comes back beside it.
REQUEST_ID_KEY = "x-request-id"
CLIENT_ID_KEY = "x-client-request-id"


class GatewayServicer(gateway_pb2_grpc.KVGatewayServicer):
    """Translates each call for ``core``; shares its in-flight gate and keys with the HTTP front."""

    def __init__(self, core: RequestCore) -> None:
        self._core = core

    async def Generate(
        self, request: gateway_pb2.GatewayRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[gateway_pb2.GatewayResponse]:
        async with errors_as_status(context):
            caller = self._core.authenticate(translate.metadata(context))  # before taking a slot
            client_id = translate.client_request_id(request)
            self._core.enter()
            try:
                wanted = translate.generate_request(request, context, self._core.model_name)
                job = await self._core.prepare(wanted, caller)
                shown_id = client_id or job.request_id
                await context.send_initial_metadata(_ids(job.request_id, client_id))
                context.set_trailing_metadata(_ids(job.request_id, client_id))
                async with contextlib.aclosing(self._core.generate(job)) as events:
                    async for item in events:
                        yield translate.response(item, job, shown_id)
            finally:
                self._core.leave()

    async def Route(
        self, request: gateway_pb2.GatewayRequest, context: grpc.aio.ServicerContext
    ) -> gateway_pb2.RouteDecision:
        async with errors_as_status(context):
            caller = self._core.authenticate(translate.metadata(context))
            client_id = translate.client_request_id(request)
            self._core.enter()  # a dry run tokenizes and looks up as a generation does: same bound
            try:
                wanted = translate.generate_request(request, context, self._core.model_name)
                job = await self._core.prepare(wanted, caller, charge=False)
                context.set_trailing_metadata(_ids(job.request_id, client_id))
                routed = await self._core.route(job)
            finally:
                self._core.leave()
            return translate.route_decision(job, routed, self._core.settings.cache.chunk_size)
        raise AssertionError("unreachable")  # errors_as_status aborts

    async def ListModels(
        self, request: gateway_pb2.ListModelsRequest, context: grpc.aio.ServicerContext
    ) -> gateway_pb2.ListModelsResponse:
        del request
        async with errors_as_status(context):
            self._core.authenticate(translate.metadata(context), count=False)
        models = self._core.models
        return gateway_pb2.ListModelsResponse(models=[
            gateway_pb2.ModelInfo(
                id=name,
                ready_workers=self._core.ready_workers(models.resolve(name)),
                max_model_len=self._core.settings.limits.context_window,
            )
            for name in models.names()
        ])  # fmt: skip


def _ids(request_id: str, client_id: str) -> tuple[tuple[str, str], ...]:
    """The request's ids as metadata: the gateway's, and the client's own when it gave one."""
    return (
        ((REQUEST_ID_KEY, request_id), (CLIENT_ID_KEY, client_id))
        if client_id
        else ((REQUEST_ID_KEY, request_id),)
    )
