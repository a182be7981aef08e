"""``WorkerServicer``: the ``kvgate.v1.KVWorker`` gRPC service over one :class:`EngineLoop`.

Generate: the request is converted and validated, admitted (bounded), then streamed: one TokenBatch
per engine step that produced tokens for it, then one FinalResult. The call's deadline bounds every
wait for the engine; when it passes, or the client cancels, the request is aborted in the engine so
its KV blocks are freed. Status codes follow what the gateway's dispatcher expects:

- INVALID_ARGUMENT: the request itself is wrong (a client error, never retried);
- ALREADY_EXISTS: the request id is in flight here;
- RESOURCE_EXHAUSTED: the admission limit is reached (the gateway tries another worker);
- UNAVAILABLE: the engine failed or the worker is stopping, before any token (retried elsewhere);
  after tokens were sent, the stream ends with a FinalResult of FINISH_REASON_ERROR instead;
- DEADLINE_EXCEEDED: the call's deadline passed.

A Generate request with a ``kv_source`` first fetches that worker's KV of its prompt prefix (see
:mod:`.kv_transfer`); a failed fetch changes nothing above. A request that arrives while fetches run
is submitted after them (:mod:`.fetch_order`). ExportKV answers INVALID_ARGUMENT for a
malformed request and FAILED_PRECONDITION for another model's fingerprint.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable

import grpc

from kvgate.proto import worker_pb2, worker_pb2_grpc
from kvgate.proto.workers import WorkerInfo, WorkerLoad
from kvgate.workers.engine import StepOutput
from kvgate.workers.service import messages
from kvgate.workers.service.engine_loop import EngineLoop
from kvgate.workers.service.errors import AdmissionFullError, DuplicateRequestError, EngineUnavailableError
from kvgate.workers.service.event_hub import EventHub
from kvgate.workers.service.event_stream import event_stream
from kvgate.workers.service.fetch_order import FetchOrder
from kvgate.workers.service.kv_transfer import KVTransfers
from kvgate.workers.service.request_stream import RequestStream

_REFUSALS: dict[type[Exception], grpc.StatusCode] = {
    ValueError: grpc.StatusCode.INVALID_ARGUMENT,
    DuplicateRequestError: grpc.StatusCode.ALREADY_EXISTS,
    AdmissionFullError: grpc.StatusCode.RESOURCE_EXHAUSTED,
    EngineUnavailableError: grpc.StatusCode.UNAVAILABLE,
}


class WorkerServicer(worker_pb2_grpc.KVWorkerServicer):
    """Stateless apart from what it is given: the engine loop, the event hub, the worker's
    registration record (``info``, with its bound address and epoch) and its KV transfers (None: no
    fetch, and ExportKV answers UNIMPLEMENTED)."""

    def __init__(
        self,
        loop: EngineLoop,
        hub: EventHub,
        info: WorkerInfo,
        load: Callable[[], WorkerLoad] | None = None,
        transfers: KVTransfers | None = None,
    ) -> None:
        self._loop = loop
        self._hub = hub
        self._info = info
        self._load = load or (lambda: loop.stats.load)
        self._transfers = transfers
        self._fetches = FetchOrder()

    async def Generate(
        self, request: worker_pb2.GenerateRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[worker_pb2.GenerateResponse]:
        stream = await self._submit(request, context)
        # However the call ends (cancelled mid-write included), the request leaves the engine.
        context.add_done_callback(lambda _: stream.close())
        produced = 0
        try:
            async with contextlib.aclosing(_until(stream, _deadline(context))) as outputs:
                async for out in outputs:
                    produced += len(out.new_token_ids)
                    if out.new_token_ids:
                        yield messages.token_batch(out)
                    if out.choice_end is not None:
                        yield messages.choice_end(out)
                    if out.finished:
                        yield messages.final_result(out)
        except TimeoutError:
            stream.close()
            await context.abort(grpc.StatusCode.DEADLINE_EXCEEDED, "the call's deadline passed")
        except EngineUnavailableError as exc:
            if produced == 0:
                await context.abort(grpc.StatusCode.UNAVAILABLE, str(exc))
            yield messages.error_result(str(exc), len(request.prompt_token_ids), produced)
        finally:
            stream.close()  # cancelled or abandoned: abort, so the engine frees the blocks

    async def Abort(
        self, request: worker_pb2.AbortRequest, context: grpc.aio.ServicerContext
    ) -> worker_pb2.AbortResponse:
        del context
        return worker_pb2.AbortResponse(aborted=self._loop.abort(request.request_id))

    async def Stats(
        self, request: worker_pb2.StatsRequest, context: grpc.aio.ServicerContext
    ) -> worker_pb2.StatsResponse:
        del request, context
        counters = None if self._transfers is None else self._transfers.counters
        return messages.stats_response(self._info, self._loop.stats, self._load(), counters)

    async def SubscribeEvents(
        self, request: worker_pb2.SubscribeEventsRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[worker_pb2.EventStreamMessage]:
        with self._hub.subscribe(admissions=request.admissions) as subscription:
            context.add_done_callback(lambda _: subscription.close())  # a client gone mid-write too
            async for message in event_stream(subscription, self._load):
                yield message

    async def ExportKV(
        self, request: worker_pb2.ExportKVRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[worker_pb2.KVBlockData]:
        try:
            engine_request = messages.export_request(request)
        except ValueError as exc:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
            raise  # unreachable: abort raises
        if request.fingerprint != self._info.fingerprint:
            detail = f"fingerprint {request.fingerprint!r} is not this worker's {self._info.fingerprint!r}"
            await context.abort(grpc.StatusCode.FAILED_PRECONDITION, detail)
        if self._transfers is None:
            await context.abort(grpc.StatusCode.UNIMPLEMENTED, "this worker exports no KV")
            return
        try:
            async for block in self._transfers.export(engine_request, request.max_tokens):
                yield block
        except ValueError as exc:  # a namespace the engine cannot hash (e.g. a partial shared chunk)
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
        except EngineUnavailableError as exc:
            await context.abort(grpc.StatusCode.UNAVAILABLE, str(exc))

    async def _submit(
        self, request: worker_pb2.GenerateRequest, context: grpc.aio.ServicerContext
    ) -> RequestStream:
        try:
            earlier = self._fetches.arrived()  # fetches running now: this request queues behind them
            engine_request = messages.engine_request(request)
            await self._loop.ensure_adapter(engine_request)  # off the loop: loading takes a while
            grammar = await self._loop.compile_grammar(engine_request)  # off the loop: it may take a while
            fetch = None
            if request.HasField("kv_source") and self._transfers is not None:
                fetch = self._transfers.fetch(request.kv_source, engine_request)  # never raises
            await self._fetches.wait(earlier, fetch)
            return self._loop.submit(engine_request, grammar)
        except (ValueError, DuplicateRequestError, AdmissionFullError, EngineUnavailableError) as exc:
            code = next(c for kind, c in _REFUSALS.items() if isinstance(exc, kind))
            await context.abort(code, str(exc))
            raise  # unreachable: abort raises


def _deadline(context: grpc.aio.ServicerContext) -> float | None:
    """The call's deadline on the event loop's clock; None when the call has none."""
    remaining = context.time_remaining()
    return None if remaining is None else asyncio.get_running_loop().time() + remaining


async def _until(stream: RequestStream, deadline: float | None) -> AsyncIterator[StepOutput]:
    """``stream``'s outputs; TimeoutError when one does not come before ``deadline``. The timeout
    covers only the waits, never a ``yield`` (a timeout must not fire inside the caller's write)."""
    while True:
        async with asyncio.timeout_at(deadline):
            try:
                out = await anext(stream)
            except StopAsyncIteration:
                return
        yield out
