"""A gateway's replicated index against real workers and a real Redis: lookups answered by the replica
that each worker's own event stream fills; Redis emptied under it without losing a worker or a
holding; a failed call purging only the gateway that saw it; worker expiries rebased onto a skewed
gateway clock."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable

import pytest
import redis.asyncio as aioredis

from kvgate.common.clock import Clock, SystemClock
from kvgate.index import IndexSettings, MemoryPrefixIndex, RedisPrefixIndex, redis_client
from kvgate.index.event_feed import EventFeed
from kvgate.index.replicated import ReplicatedIndex
from kvgate.proto.ids import WorkerId
from kvgate.proto.layout import DEFAULT_TTL_S
from tests.index.helpers import LOAD, info
from tests.support.fake_clock import SkewedClock
from tests.support.real_workers import StartWorker
from tests.support.redis_server import RedisServer
from tests.workers.model.conftest import one_torch_thread  # noqa: F401 -- autouse: a real engine runs here
from tests.workers.service.helpers import (
    CACHE,
    client,
    eventually,
    generate_request,
    hashes_of,
    prompt,
    read_generation,
)

pytestmark = pytest.mark.redis
W = WorkerId("worker-0")
SETTINGS = IndexSettings(timeout_s=1.0, heartbeat_ttl_s=5.0)


OpenGateway = Callable[..., ReplicatedIndex]


@pytest.fixture
async def open_gateway(private_redis: RedisServer) -> AsyncIterator[OpenGateway]:
    opened: list[ReplicatedIndex] = []

    def open_(clock: Clock | None = None) -> ReplicatedIndex:
        clock = clock or SystemClock()
        shared = RedisPrefixIndex(redis_client(private_redis.url, SETTINGS), SETTINGS, clock)
        replica = MemoryPrefixIndex(SETTINGS, clock)
        feed = EventFeed(replica, poll_s=0.1, retry_s=(0.05, 0.2), secret=CACHE.secret, clock=clock)
        opened.append(gateway := ReplicatedIndex(shared, replica, feed, CACHE.secret, shared_refresh_s=0.0))
        return gateway

    yield open_
    for gateway in opened:
        await gateway.close()


async def _served(address: str, ids: list[int]) -> None:
    async with client(address) as stub:
        await read_generation(stub.Generate(generate_request(ids, f"r-{ids[0]}")))


def _holds(gateway: ReplicatedIndex, ids: list[int]) -> Callable[[], Awaitable[bool]]:
    async def check() -> bool:
        await gateway.workers()  # the directory's periodic refresh: follows what it discovers
        return (await gateway.lookup(hashes_of(ids))).chunks_for(W) == 2

    return check


async def test_lookups_come_from_the_workers_stream_and_outlive_an_emptied_redis(
    start_worker: StartWorker, open_gateway: OpenGateway, private_redis: RedisServer
) -> None:
    publisher = RedisPrefixIndex(redis_client(private_redis.url, SETTINGS), SETTINGS, SystemClock())
    worker = await start_worker(index=publisher)
    gateway = open_gateway()
    ids = prompt(300)
    await _served(worker.info.address, ids)
    await eventually(_holds(gateway, ids))

    raw = aioredis.Redis.from_url(private_redis.url)
    await raw.flushall()  # Redis loses everything: membership and holdings
    await raw.aclose()

    assert [s.info.worker_id for s in await gateway.workers()] == [W]  # still followed
    assert (await gateway.lookup(hashes_of(ids))).chunks_for(W) == 2  # still routed by cache
    # the worker registers again and republishes: the shared index heals under the replica
    await eventually(lambda: _shared_holds(publisher, ids))


async def _shared_holds(index: RedisPrefixIndex, ids: list[int]) -> bool:
    return (await index.lookup(hashes_of(ids))).chunks_for(W) == 2


async def test_a_failed_call_purges_the_worker_from_that_gateway_alone(
    start_worker: StartWorker, open_gateway: OpenGateway, private_redis: RedisServer
) -> None:
    publisher = RedisPrefixIndex(redis_client(private_redis.url, SETTINGS), SETTINGS, SystemClock())
    worker = await start_worker(index=publisher)
    first, second = open_gateway(), open_gateway()
    ids = prompt(300)
    await _served(worker.info.address, ids)
    await eventually(_holds(first, ids))
    await eventually(_holds(second, ids))

    assert await first.purge(W) == 2

    assert (await first.lookup(hashes_of(ids))).matches == {}
    assert (await second.lookup(hashes_of(ids))).chunks_for(W) == 2
    assert [s.info.worker_id for s in await second.workers()] == [W]
    assert await _shared_holds(publisher, ids)  # nothing removed for anyone else
    await eventually(_holds(first, ids))  # and the purged replica resyncs from the stream


async def test_worker_expiries_are_rebased_onto_a_skewed_gateway_clock(
    start_worker: StartWorker, open_gateway: OpenGateway, private_redis: RedisServer
) -> None:
    """A gateway whose clock runs ahead by more than the KV TTL would see every holding expired on
    arrival if it compared the worker's deadlines with its own clock."""
    publisher = RedisPrefixIndex(redis_client(private_redis.url, SETTINGS), SETTINGS, SystemClock())
    worker = await start_worker(index=publisher)
    ahead = open_gateway(SkewedClock(round(DEFAULT_TTL_S * 1000) + 60_000))
    ids = prompt(300)
    await _served(worker.info.address, ids)
    await eventually(_holds(ahead, ids))


async def test_only_workers_whose_stream_this_gateway_follows_are_marked_followed(
    start_worker: StartWorker, open_gateway: OpenGateway, private_redis: RedisServer
) -> None:
    """A worker known from Redis alone (here: a record whose address answers nothing) is a candidate
    whose holdings this gateway cannot know, so its router predicts them from its own decisions."""
    publisher = RedisPrefixIndex(redis_client(private_redis.url, SETTINGS), SETTINGS, SystemClock())
    worker = await start_worker(index=publisher)
    gateway = open_gateway()
    ids = prompt(300)
    await _served(worker.info.address, ids)
    await eventually(_holds(gateway, ids))
    listed_only = WorkerId("worker-x")
    await publisher.register(info(listed_only), LOAD)

    async def both_listed() -> bool:
        return {s.info.worker_id for s in await gateway.workers()} == {W, listed_only}

    await eventually(both_listed)
    followed = {s.info.worker_id: s.followed for s in await gateway.workers()}
    assert followed == {W: True, listed_only: False}
