"""A worker serves only callers with its deployment's call token; health checks stay open to all.
The registration record it publishes is signed with the deployment secret."""

from __future__ import annotations

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from kvgate.common.clock import SystemClock
from kvgate.index import IndexSettings, MemoryPrefixIndex
from kvgate.proto import worker_pb2
from kvgate.proto.trust import record_verified
from tests.support.real_workers import StartWorker
from tests.workers.model.conftest import one_torch_thread  # noqa: F401 -- autouse: a real engine runs here
from tests.workers.service.helpers import CACHE, client, eventually, generate_request, greedy, prompt


@pytest.mark.parametrize("secret", [b"", b"another-deployment-secret!"], ids=["none", "another"])
async def test_calls_without_the_deployments_token_are_refused(
    start_worker: StartWorker, secret: bytes
) -> None:
    worker = await start_worker()
    async with client(worker.info.address, secret=secret) as stub:
        with pytest.raises(grpc.aio.AioRpcError) as stats:
            await stub.Stats(worker_pb2.StatsRequest())
        with pytest.raises(grpc.aio.AioRpcError) as generate:
            async for _ in stub.Generate(generate_request(prompt(10), "r", greedy(2))):
                pass
        with pytest.raises(grpc.aio.AioRpcError) as events:
            async for _ in stub.SubscribeEvents(worker_pb2.SubscribeEventsRequest()):
                pass
    for refused in (stats, generate, events):
        assert refused.value.code() is grpc.StatusCode.UNAUTHENTICATED
        assert "call token" in refused.value.details()
    assert worker.loop is not None
    assert worker.loop.stats.counters.requests == 0  # nothing reached the engine


async def test_the_deployments_token_is_served_and_health_needs_none(start_worker: StartWorker) -> None:
    worker = await start_worker()
    async with client(worker.info.address) as stub:
        reply = await stub.Stats(worker_pb2.StatsRequest())
    assert reply.info.worker_id == worker.info.worker_id
    async with grpc.aio.insecure_channel(worker.info.address) as channel:
        check = await health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest())
    assert check.status == health_pb2.HealthCheckResponse.SERVING


async def test_the_published_record_is_signed_with_the_deployment_secret(start_worker: StartWorker) -> None:
    index = MemoryPrefixIndex(IndexSettings(), SystemClock())
    worker = await start_worker(index)
    statuses = await eventually(index.workers)
    assert statuses[0].info == worker.info
    assert record_verified(statuses[0].info, CACHE.secret)
    assert not record_verified(statuses[0].info, b"another-deployment-secret!")
