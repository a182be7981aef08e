"""The index publisher, against the memory index and a real Redis: register, heartbeats, events,
deregister; and a Redis restart, through which the worker keeps serving and after which it resyncs."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import AsyncIterator

import pytest

from kvgate.common.clock import SystemClock
from kvgate.index import IndexSettings, MemoryPrefixIndex, PrefixIndex, RedisPrefixIndex, redis_client
from kvgate.proto.ids import WorkerId
from kvgate.workers.service import EngineUnavailableError
from tests.index.conftest import drop_namespace
from tests.support.real_workers import StartWorker
from tests.support.redis_server import RedisServer
from tests.workers.service.helpers import (
    CACHE,
    client,
    eventually,
    generate_request,
    hashes_of,
    prompt,
    read_generation,
)

W = WorkerId("worker-0")
SETTINGS = IndexSettings(timeout_s=0.5, heartbeat_ttl_s=5.0)  # generous on a shared 2-core machine


@pytest.fixture(params=["memory", pytest.param("redis", marks=pytest.mark.redis)])
async def index(request: pytest.FixtureRequest) -> AsyncIterator[PrefixIndex]:
    if request.param == "memory":
        yield MemoryPrefixIndex(SETTINGS, SystemClock())
        return
    url = request.getfixturevalue("redis_url")
    namespace = f"kvgate-test-{uuid.uuid4().hex[:12]}"
    settings = IndexSettings(namespace=namespace, timeout_s=0.5, heartbeat_ttl_s=5.0)
    redis_index = RedisPrefixIndex(redis_client(url, settings), settings, SystemClock())
    await redis_index.start()
    yield redis_index
    await redis_index.close()
    await drop_namespace(url, namespace)


async def holds(index: PrefixIndex, ids: list[int]) -> int:
    """Leading chunks of ``ids`` the index says worker-0 holds."""
    return (await index.lookup(hashes_of(ids))).chunks_for(W)


async def test_register_heartbeat_publish_deregister(index: PrefixIndex, start_worker: StartWorker) -> None:
    ids = prompt(300)
    worker = await start_worker(index)
    [status] = await eventually(index.workers)
    assert status.info == worker.info
    assert status.info.fingerprint == CACHE.fingerprint()
    assert status.load.gpu_blocks_total == 64

    async def heartbeat_moved() -> bool:
        [now] = await index.workers()
        return now.heartbeat_at_ms > status.heartbeat_at_ms

    await eventually(heartbeat_moved)
    async with client(worker.info.address) as stub:
        await read_generation(stub.Generate(generate_request(ids, "r")))
    assert await eventually(lambda: holds(index, ids)) == 2

    await worker.stop()
    assert await index.workers() == []
    assert await holds(index, ids) == 0


async def test_a_purged_worker_republishes_everything_with_its_next_batch(
    index: PrefixIndex,  # set up first, torn down last: the worker deregisters from it on stop
    start_worker: StartWorker,
) -> None:
    first, second = prompt(300, seed=1), prompt(300, seed=2)
    worker = await start_worker(index)
    async with client(worker.info.address) as stub:
        await read_generation(stub.Generate(generate_request(first, "first")))
        assert await eventually(lambda: holds(index, first)) == 2
        await index.purge(W)  # what a gateway does when the worker failed one of its requests
        assert await holds(index, first) == 0
        await read_generation(stub.Generate(generate_request(second, "second")))
        assert await eventually(lambda: holds(index, second)) == 2  # GAP -> resync with a snapshot
    assert await holds(index, first) == 2


@pytest.mark.redis
async def test_the_worker_serves_through_a_redis_restart_and_resyncs_after(
    start_worker: StartWorker, private_redis: RedisServer
) -> None:
    index = RedisPrefixIndex(redis_client(private_redis.url, SETTINGS), SETTINGS, SystemClock())
    before, during = prompt(300, seed=1), prompt(300, seed=2)
    worker = await start_worker(index)
    publisher = worker.publisher
    assert publisher is not None
    async with client(worker.info.address) as stub:
        await read_generation(stub.Generate(generate_request(before, "before")))
        assert await eventually(lambda: holds(index, before)) == 2

        private_redis.stop()
        served = await read_generation(stub.Generate(generate_request(during, "during")))
        assert served.usage.completion_tokens == 8  # the index is a hint: serving never waits on it
        await eventually(lambda: publisher.failures > 0 and publisher.degraded)

        private_redis.start()  # empty: no persistence
        assert await eventually(lambda: holds(index, during)) == 2  # resynced from the snapshot
    assert await holds(index, before) == 2
    assert [s.info for s in await index.workers()] == [worker.info]
    assert not publisher.degraded
    await worker.stop()
    await index.close()


class _DeafIndex(MemoryPrefixIndex):
    """An index whose deregister never answers and ignores cancellation (a wedged client library)."""

    released = asyncio.Event()

    async def deregister(self, worker_id: WorkerId, epoch: int) -> bool:
        while not self.released.is_set():
            with contextlib.suppress(asyncio.CancelledError):
                await self.released.wait()
        return True


async def test_the_worker_stops_although_leaving_the_index_hangs(
    start_worker: StartWorker, caplog: pytest.LogCaptureFixture
) -> None:
    index = _DeafIndex(SETTINGS, SystemClock())
    worker = await start_worker(index, shutdown_grace_s=0.2)
    assert await eventually(lambda: index.workers())  # registered
    with caplog.at_level(logging.WARNING):
        await worker.stop()  # returns: the hanging step is abandoned after its deadline
    assert "leaving the index did not finish" in caplog.text
    assert worker.loop is not None
    with pytest.raises(EngineUnavailableError, match="not running"):
        await worker.loop.call(lambda engine: None)  # the engine was stopped all the same
    index.released.set()
