"""The public gRPC service (``KVGateway``) for gRPC clients: same semantics as the HTTP API.

Deadlines: the call's deadline bounds the request (and is passed on to the worker). Cancellation:
when the client cancels, the handler is cancelled and the worker's sequence aborted with it.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncIterator
from dataclasses import replace
from typing import Any

import grpc
import numpy as np
from grpc_health.v1 import health, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from kvgate.gateway.admission import InFlightGate
from kvgate.gateway.api.auth import NAMESPACE_HEADER, Authenticator, presented_key
from kvgate.gateway.api.errors import ApiError, from_upstream
from kvgate.gateway.prepare import Generation, Preparer
from kvgate.gateway.routing.types import RouteReason
from kvgate.gateway.tenancy import Caller
from kvgate.gateway.textgen import TextDelta, TextDone, TextGenerator
from kvgate.gateway.upstream.dispatch import Dispatcher
from kvgate.gateway.upstream.errors import UpstreamError
from kvgate.gateway.upstream.job import Job
from kvgate.grpc_options import SERVER_OPTIONS
from kvgate.proto import common_pb2, convert, gateway_pb2, gateway_pb2_grpc
from kvgate.proto.sampling import CacheHint

_STATUS = {
    400: grpc.StatusCode.INVALID_ARGUMENT,
    401: grpc.StatusCode.UNAUTHENTICATED,
    403: grpc.StatusCode.PERMISSION_DENIED,
    404: grpc.StatusCode.NOT_FOUND,
    413: grpc.StatusCode.INVALID_ARGUMENT,
    429: grpc.StatusCode.RESOURCE_EXHAUSTED,
    503: grpc.StatusCode.UNAVAILABLE,
    504: grpc.StatusCode.DEADLINE_EXCEEDED,
}
_REASONS = {
    RouteReason.CACHE_HIT: gateway_pb2.ROUTE_REASON_CACHE_HIT,
    RouteReason.LOAD_BALANCED: gateway_pb2.ROUTE_REASON_LOAD_BALANCED,
    RouteReason.FALLBACK: gateway_pb2.ROUTE_REASON_FALLBACK,
    RouteReason.PINNED: gateway_pb2.ROUTE_REASON_PINNED,
}
MAX_CLIENT_SALT_CHARS = 256
_OPTIONAL = ("temperature", "top_p", "top_k", "seed")


class GatewayServicer(gateway_pb2_grpc.KVGatewayServicer):
    def __init__(
        self,
        preparer: Preparer,
        generator: TextGenerator,
        dispatcher: Dispatcher,
        model_name: str,
        context_window: int,
        auth: Authenticator,
        gate: InFlightGate,
    ) -> None:
        self._auth = auth
        self._gate = gate
        self._preparer = preparer
        self._generator = generator
        self._dispatcher = dispatcher
        self._model = model_name
        self._context_window = context_window

    async def Generate(
        self,
        request: gateway_pb2.GatewayRequest,
        context: grpc.aio.ServicerContext,
    ) -> AsyncIterator[gateway_pb2.GatewayResponse]:
        async with _errors_as_status(context):
            if not self._gate.try_enter():
                raise self._gate.overloaded()
            try:
                job = await self._job(request, context, charge=True)
                async with contextlib.aclosing(self._generator.stream(job)) as events:
                    async for item in events:
                        yield _response(item, job)
            finally:
                self._gate.leave()

    async def Route(
        self,
        request: gateway_pb2.GatewayRequest,
        context: grpc.aio.ServicerContext,
    ) -> gateway_pb2.RouteDecision:
        async with _errors_as_status(context):
            job = await self._job(request, context, charge=False)
            routed = await self._dispatcher.preview(job)
            matches = routed.lookup.matches.values() if routed.lookup is not None else ()
            return gateway_pb2.RouteDecision(
                prompt_tokens=job.prompt_tokens,
                full_chunks=routed.num_chunks,
                chunk_size=self._preparer.chunk_size,
                chosen_worker=routed.decision.worker_id,
                reason=_REASONS[routed.decision.reason],
                predicted_cached_tokens=routed.decision.predicted_cached_tokens,
                matches=[
                    gateway_pb2.WorkerMatch(
                        worker_id=m.worker_id,
                        matched_chunks=m.chunks,
                        gpu_chunks=m.gpu_chunks,
                        cpu_chunks=m.cpu_chunks,
                        pending_chunks=m.pending_chunks,
                    )
                    for m in matches
                ],
            )
        raise AssertionError("unreachable")  # _errors_as_status aborts

    async def ListModels(
        self,
        request: gateway_pb2.ListModelsRequest,
        context: grpc.aio.ServicerContext,
    ) -> gateway_pb2.ListModelsResponse:
        del request
        async with _errors_as_status(context):
            self._caller(context)
        return gateway_pb2.ListModelsResponse(
            models=[
                gateway_pb2.ModelInfo(
                    id=self._model,
                    ready_workers=self._dispatcher.routable_count(),
                    max_model_len=self._context_window,
                )
            ]
        )

    def _caller(self, context: grpc.aio.ServicerContext) -> Caller:
        """The caller of the call's metadata (``authorization: Bearer KEY`` or ``x-api-key``); 401 as
        UNAUTHENTICATED when keys are configured and none matches."""
        metadata = {k.lower(): v for k, v in (context.invocation_metadata() or ()) if isinstance(v, str)}
        key = presented_key(metadata.get("authorization"), metadata.get("x-api-key"))
        return self._auth.caller(key, metadata.get(NAMESPACE_HEADER))

    async def _job(
        self, request: gateway_pb2.GatewayRequest, context: grpc.aio.ServicerContext, charge: bool
    ) -> Job:
        caller = self._caller(context)
        self._preparer.check_model(request.model)
        ids = await self._prompt(request)
        shared = None
        if request.WhichOneof("input") == "chat":
            messages = [{"role": m.role, "content": m.content} for m in request.chat.messages]
            shared = await self._preparer.system_prefix(caller, messages, ids)
        sampling = _sampling(request.sampling)
        generation = Generation(
            request.model,
            sampling,
            ids,
            tuple(request.sampling.stop),
            cache_key=request.prompt_cache_key or None,
            cache_hint=_hint(request),
            client_salt=_client_salt(request.cache_salt),
            shared_prefix=shared,
        )
        job = self._preparer.job(generation, caller, charge=charge)
        remaining = context.time_remaining()
        if remaining is not None:  # the client's deadline, if sooner than the gateway's own
            job = _with_deadline(job, time.monotonic() + remaining)
        return job

    async def _prompt(self, request: gateway_pb2.GatewayRequest) -> np.ndarray:
        kind = request.WhichOneof("input")
        if kind == "chat":
            return await self._preparer.chat_prompt(
                [{"role": m.role, "content": m.content} for m in request.chat.messages]
            )
        if kind == "prompt":
            return await self._preparer.text_prompt(request.prompt)
        if kind == "tokens" and request.tokens.ids:
            return await self._preparer.text_prompt(list(request.tokens.ids))
        raise ApiError(400, "the request has no input: set prompt, chat or tokens", param="input")


def _sampling(msg: common_pb2.SamplingParams) -> dict[str, Any]:
    fields: dict[str, Any] = {name: getattr(msg, name) for name in _OPTIONAL if msg.HasField(name)}
    fields["max_tokens"] = msg.max_tokens or None
    fields["stop_token_ids"] = tuple(msg.stop_token_ids)
    fields["ignore_eos"] = msg.ignore_eos or None
    return fields


def _hint(request: gateway_pb2.GatewayRequest) -> CacheHint | None:
    if not request.HasField("cache_hint"):
        return None
    try:
        hint = convert.cache_hint_from_proto(request.cache_hint)
    except ValueError as exc:
        raise ApiError(400, str(exc), param="cache_hint") from exc
    return hint if hint.active else None


def _with_deadline(job: Job, deadline_s: float) -> Job:
    return replace(job, deadline_s=min(deadline_s, job.deadline_s or deadline_s))


def _response(item: TextDelta | TextDone, job: Job) -> gateway_pb2.GatewayResponse:
    if isinstance(item, TextDelta):
        return gateway_pb2.GatewayResponse(delta=gateway_pb2.Delta(text=item.text, token_ids=item.token_ids))
    decision = item.routed.decision
    final = gateway_pb2.Final(
        finish_reason=convert.finish_reason_to_proto(item.finish_reason),
        usage=convert.usage_to_proto(item.usage),
        worker_id=decision.worker_id,
        route_reason=_REASONS[decision.reason],
        predicted_cached_tokens=decision.predicted_cached_tokens,
        request_id=job.request_id,
    )
    if item.matched_stop is not None:
        final.matched_stop = item.matched_stop
    return gateway_pb2.GatewayResponse(final=final)


@contextlib.asynccontextmanager
async def _errors_as_status(context: grpc.aio.ServicerContext) -> AsyncIterator[None]:
    """Turns the gateway's errors into gRPC statuses with their messages."""
    try:
        yield
    except UpstreamError as exc:
        error = from_upstream(exc)
        await context.abort(_STATUS.get(error.status, grpc.StatusCode.UNAVAILABLE), error.message)
    except ApiError as exc:
        await context.abort(_STATUS.get(exc.status, grpc.StatusCode.INTERNAL), exc.message)


def build_grpc_server(servicer: GatewayServicer, address: str) -> tuple[grpc.aio.Server, int]:
    """A grpc.aio server with the gateway service, grpc.health.v1 and reflection; not started.
    Returns the server and the bound port (``address`` may end in ``:0``)."""
    server = grpc.aio.server(options=SERVER_OPTIONS)
    gateway_pb2_grpc.add_KVGatewayServicer_to_server(servicer, server)
    health_servicer = health.aio.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    names = (
        gateway_pb2.DESCRIPTOR.services_by_name["KVGateway"].full_name,
        reflection.SERVICE_NAME,
        health.SERVICE_NAME,
    )
    reflection.enable_server_reflection(names, server)
    port = server.add_insecure_port(address)
    return server, port


def _client_salt(salt: str) -> str:
    """The client's own cache salt, bounded as on HTTP."""
    if len(salt) > MAX_CLIENT_SALT_CHARS:
        message = f"cache_salt has more than {MAX_CLIENT_SALT_CHARS} characters"
        raise ApiError(400, message, param="cache_salt")
    return salt
