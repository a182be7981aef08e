"""A real grpc.aio server and client speak the worker contract over loopback TCP.

The servicer here is a stand-in for the engine (two token batches, then a final message), so these tests
pin the wire shapes, the stream protocol and the health service, not generation itself.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import grpc
import pytest
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from kvgate.proto import convert, worker_pb2, worker_pb2_grpc
from kvgate.proto.events import EventBatch, KVEvent, Snapshot
from kvgate.proto.ids import ChunkHash, Epoch, SeqNo, Tier, WorkerId
from kvgate.proto.sampling import CacheHint, FinishReason, SamplingParams, Usage
from kvgate.proto.workers import WorkerInfo, WorkerLoad

DEADLINE_S = 10.0
SERVICE = "kvgate.v1.KVWorker"
INFO = WorkerInfo(WorkerId("worker-0"), Epoch(7), "127.0.0.1:0", "f" * 32, "tiny-llama")
CHUNK = ChunkHash(bytes(range(16)))


class TinyWorker(worker_pb2_grpc.KVWorkerServicer):
    """Echoes the prompt's last three tokens as two batches, then reports usage with the predicted
    cache hit as the actual one. A prompt starting with token 0 hangs after its first batch until the
    call is cancelled; ``cancelled`` is then set."""

    def __init__(self) -> None:
        self.cancelled = asyncio.Event()

    async def Generate(  # noqa: N802 (gRPC method name)
        self, request: worker_pb2.GenerateRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[worker_pb2.GenerateResponse]:
        tail = list(request.prompt_token_ids[-3:])
        yield worker_pb2.GenerateResponse(tokens=worker_pb2.TokenBatch(token_ids=tail[:2]))
        if request.prompt_token_ids[0] == 0:
            await self._hang_until_cancelled()
        yield worker_pb2.GenerateResponse(tokens=worker_pb2.TokenBatch(token_ids=tail[2:]))
        yield worker_pb2.GenerateResponse(final=self._final(request, completion_tokens=len(tail)))

    async def Stats(  # noqa: N802 (gRPC method name)
        self, request: worker_pb2.StatsRequest, context: grpc.aio.ServicerContext
    ) -> worker_pb2.StatsResponse:
        load = WorkerLoad(running_seqs=1, gpu_blocks_total=64, gpu_blocks_free=60)
        return worker_pb2.StatsResponse(
            info=convert.worker_info_to_proto(INFO),
            load=convert.worker_load_to_proto(load),
            prompt_tokens_total=300,
            cached_tokens_total=256,
            gpu_evictions=worker_pb2.Evictions(ttl=2, pressure=1),
        )

    async def SubscribeEvents(  # noqa: N802 (gRPC method name)
        self, request: worker_pb2.SubscribeEventsRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[worker_pb2.EventStreamMessage]:
        snapshot = Snapshot(INFO.worker_id, INFO.epoch, SeqNo(0), ())
        batch = EventBatch(INFO.worker_id, INFO.epoch, SeqNo(1), (KVEvent.stored(CHUNK, Tier.GPU, 1_000),))
        yield worker_pb2.EventStreamMessage(snapshot=convert.snapshot_to_proto(snapshot))
        yield worker_pb2.EventStreamMessage(batch=convert.event_batch_to_proto(batch))

    @staticmethod
    def _final(request: worker_pb2.GenerateRequest, completion_tokens: int) -> worker_pb2.FinalResult:
        cached = request.predicted_cached_tokens
        usage = Usage(len(request.prompt_token_ids), completion_tokens, cached, cached, 0)
        return worker_pb2.FinalResult(
            finish_reason=convert.finish_reason_to_proto(FinishReason.LENGTH),
            usage=convert.usage_to_proto(usage),
        )

    async def _hang_until_cancelled(self) -> None:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            self.cancelled.set()
            raise


@pytest.fixture
async def served() -> AsyncIterator[tuple[TinyWorker, grpc.aio.Channel]]:
    """A started server on 127.0.0.1 (port chosen by the OS) with the worker and health services, and a
    client channel to it. Both are closed on teardown."""
    server = grpc.aio.server()
    worker = TinyWorker()
    worker_pb2_grpc.add_KVWorkerServicer_to_server(worker, server)
    health_servicer = health.aio.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    await health_servicer.set(SERVICE, health_pb2.HealthCheckResponse.SERVING)
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            yield worker, channel
    finally:
        await server.stop(grace=None)


def _request(prompt: list[int], **fields: Any) -> worker_pb2.GenerateRequest:
    return worker_pb2.GenerateRequest(
        request_id="req-1",
        prompt_token_ids=prompt,
        sampling=convert.sampling_params_to_proto(SamplingParams(temperature=0.0, max_tokens=3)),
        cache_hint=convert.cache_hint_to_proto(CacheHint(pinned_prefix_tokens=128, ttl_s=300)),
        **fields,
    )


async def test_generate_streams_token_batches_then_one_final(
    served: tuple[TinyWorker, grpc.aio.Channel],
) -> None:
    _, channel = served
    stub = worker_pb2_grpc.KVWorkerStub(channel)
    prompt = list(range(1, 301))

    call = stub.Generate(_request(prompt, predicted_cached_tokens=256), timeout=DEADLINE_S)
    responses = [r async for r in call]

    assert [r.WhichOneof("kind") for r in responses] == ["tokens", "tokens", "final"]
    assert [list(r.tokens.token_ids) for r in responses[:2]] == [[298, 299], [300]]
    final = responses[-1].final
    assert convert.finish_reason_from_proto(final.finish_reason) is FinishReason.LENGTH
    assert convert.usage_from_proto(final.usage) == Usage(300, 3, 256, 256, 0)
    assert not final.HasField("matched_stop")
    assert await call.code() == grpc.StatusCode.OK


async def test_cancelling_generate_cancels_the_server_handler(
    served: tuple[TinyWorker, grpc.aio.Channel],
) -> None:
    worker, channel = served
    call = worker_pb2_grpc.KVWorkerStub(channel).Generate(_request([0, 5, 6, 7]), timeout=DEADLINE_S)

    first = await call.read()
    call.cancel()

    assert list(first.tokens.token_ids) == [5, 6]
    await asyncio.wait_for(worker.cancelled.wait(), DEADLINE_S)
    assert call.cancelled()


async def test_stats_and_event_stream_carry_domain_values(
    served: tuple[TinyWorker, grpc.aio.Channel],
) -> None:
    _, channel = served
    stub = worker_pb2_grpc.KVWorkerStub(channel)

    stats = await stub.Stats(worker_pb2.StatsRequest(), timeout=DEADLINE_S)
    messages = [
        m async for m in stub.SubscribeEvents(worker_pb2.SubscribeEventsRequest(), timeout=DEADLINE_S)
    ]

    assert convert.worker_info_from_proto(stats.info) == INFO
    assert convert.worker_load_from_proto(stats.load).kv_usage == pytest.approx(1 / 16)
    assert (stats.cached_tokens_total, stats.gpu_evictions.pressure) == (256, 1)
    assert [m.WhichOneof("kind") for m in messages] == ["snapshot", "batch"]
    batch = convert.event_batch_from_proto(messages[1].batch)
    assert batch.seq == convert.snapshot_from_proto(messages[0].snapshot).seq + 1
    assert batch.events == (KVEvent.stored(CHUNK, Tier.GPU, 1_000),)


async def test_unimplemented_rpc_reports_unimplemented(served: tuple[TinyWorker, grpc.aio.Channel]) -> None:
    _, channel = served
    with pytest.raises(grpc.aio.AioRpcError) as failure:
        await worker_pb2_grpc.KVWorkerStub(channel).Abort(
            worker_pb2.AbortRequest(request_id="req-1"), timeout=DEADLINE_S
        )
    assert failure.value.code() == grpc.StatusCode.UNIMPLEMENTED


async def test_health_service_reports_serving(served: tuple[TinyWorker, grpc.aio.Channel]) -> None:
    _, channel = served
    stub = health_pb2_grpc.HealthStub(channel)

    worker_health = await stub.Check(health_pb2.HealthCheckRequest(service=SERVICE), timeout=DEADLINE_S)
    overall = await stub.Check(health_pb2.HealthCheckRequest(service=""), timeout=DEADLINE_S)

    assert worker_health.status == health_pb2.HealthCheckResponse.SERVING
    assert overall.status == health_pb2.HealthCheckResponse.SERVING
    with pytest.raises(grpc.aio.AioRpcError) as failure:
        await stub.Check(health_pb2.HealthCheckRequest(service="kvgate.v1.Nope"), timeout=DEADLINE_S)
    assert failure.value.code() == grpc.StatusCode.NOT_FOUND
