"""Behaviour only the Redis backend has: one round trip, self-healing key TTLs, shared views,
failing fast when Redis is down or slow, and recovering when it returns."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import time
import uuid
from collections.abc import AsyncIterator, Iterator

import pytest
import redis.asyncio as aioredis
from redis.asyncio.connection import Connection, ConnectionPool

from kvgate.common.clock import ManualClock, SystemClock
from kvgate.index import IndexSettings, IndexUnavailableError, RedisPrefixIndex, redis_client
from kvgate.index.types import LookupResult
from kvgate.proto.ids import Epoch, Tier
from tests.index.conftest import drop_namespace, make_settings
from tests.index.helpers import LOAD, A, B, batch, chain, info, stored
from tests.support.redis_server import RedisServer

pytestmark = pytest.mark.redis
LONG = 10**15


class CountingConnection(Connection):
    """Counts the times a request is written to the socket: one per round trip."""

    sends = 0

    async def send_packed_command(self, command, check_health=True):
        CountingConnection.sends += 1
        return await super().send_packed_command(command, check_health)

    async def send_packed_commands(self, commands, check_health=True):  # a pipeline: one write
        CountingConnection.sends += 1
        return await super().send_packed_commands(commands, check_health)


@pytest.fixture
async def shared_namespace(redis_url: str) -> AsyncIterator[str]:
    namespace = f"kvgate-test-{uuid.uuid4().hex[:12]}"
    yield namespace
    await drop_namespace(redis_url, namespace)


async def test_lookup_of_256_chunks_is_one_round_trip(redis_url: str, shared_namespace: str) -> None:
    settings = make_settings(shared_namespace)
    host, port = redis_url.removeprefix("redis://").split("/")[0].split(":")
    pool = ConnectionPool(
        connection_class=CountingConnection, host=host, port=int(port), decode_responses=True
    )
    index = RedisPrefixIndex(aioredis.Redis(connection_pool=pool), settings, ManualClock(), server_time=False)
    await index.start()
    await index.register(info(A), LOAD)
    await index.register(info(B), LOAD)
    hashes = chain(*range(256))
    await index.apply(batch(A, 1, *stored(hashes, LONG)))
    await index.apply(batch(B, 1, *stored(hashes[:100], LONG, Tier.CPU)))

    before = CountingConnection.sends
    result = await index.lookup(hashes)
    after = CountingConnection.sends
    await index.close()

    assert after - before == 1
    assert result.chunks_for(A) == 256
    assert result.chunks_for(B) == 100


async def test_keys_expire_in_redis_so_the_index_heals_itself(redis_url: str, shared_namespace: str) -> None:
    """Even if every later event were lost, Redis forgets a holding soon after it expires."""
    settings = IndexSettings(namespace=shared_namespace, timeout_s=2, key_slack_s=0.2)
    index = RedisPrefixIndex(redis_client(redis_url, settings), settings, SystemClock())
    raw = aioredis.Redis.from_url(redis_url, decode_responses=True)
    await index.register(info(A), LOAD)
    hashes = chain(0, 1)
    await index.apply(batch(A, 1, *stored(hashes, SystemClock().now_ms() + 200)))
    key = f"{index.group_prefix(A)}:h:{A}"
    assert 0 < await raw.pttl(key) <= 400

    await asyncio.sleep(0.6)

    assert not await raw.exists(key)
    await raw.aclose()
    await index.close()


async def test_two_gateway_replicas_share_one_view(redis_url: str, shared_namespace: str) -> None:
    settings = make_settings(shared_namespace)
    clock = ManualClock()
    gateway_a = RedisPrefixIndex(redis_client(redis_url, settings), settings, clock, server_time=False)
    gateway_b = RedisPrefixIndex(redis_client(redis_url, settings), settings, clock, server_time=False)
    worker = RedisPrefixIndex(redis_client(redis_url, settings), settings, clock, server_time=False)
    await worker.register(info(A), LOAD)
    await worker.apply(batch(A, 1, *stored(chain(0, 1), LONG)))
    await gateway_a.add_pending(chain(0, 1, 2), A)

    seen_by_b = await gateway_b.lookup(chain(0, 1, 2))

    assert seen_by_b.matches[A].tiers == "GGP"
    for index in (gateway_a, gateway_b, worker):
        await index.close()


def _unreachable_url() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"redis://127.0.0.1:{sock.getsockname()[1]}/0"  # closed again: connection refused


@contextlib.contextmanager
def _silent_server() -> Iterator[str]:
    """A TCP server that accepts connections and never answers (a hung Redis)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(16)
        yield f"redis://127.0.0.1:{sock.getsockname()[1]}/0"


async def _assert_fails_fast(url: str, timeout_s: float) -> None:
    settings = IndexSettings(timeout_s=timeout_s)
    index = RedisPrefixIndex(redis_client(url, settings), settings, ManualClock(), server_time=False)
    for call in (index.lookup(chain(0, 1)), index.heartbeat(A, Epoch(1), LOAD), index.workers()):
        start = time.perf_counter()
        with pytest.raises(IndexUnavailableError):
            await call
        # bounded by the timeout plus scheduling noise, not by any socket default
        assert time.perf_counter() - start < timeout_s + 0.25
    await index.close()


async def test_unreachable_redis_fails_fast_with_a_typed_error() -> None:
    await _assert_fails_fast(_unreachable_url(), timeout_s=0.025)


async def test_hung_redis_fails_within_the_timeout() -> None:
    with _silent_server() as url:
        await _assert_fails_fast(url, timeout_s=0.025)


async def test_slow_redis_fails_fast_and_recovers(private_redis: RedisServer) -> None:
    """A call during a 3 s stall of Redis fails within the index timeout (0.1 s), long before the
    stall ends; once Redis answers again, so does the index. The client's own socket timeout is
    generous, so only the index's bound decides how fast a call fails, and a busy machine cannot
    fail the set-up."""
    settings = IndexSettings(timeout_s=0.1)
    client = redis_client(private_redis.url, IndexSettings(timeout_s=10))
    index = RedisPrefixIndex(client, settings, ManualClock(), server_time=False)
    await index.start()
    await _until(lambda: index.register(info(A), LOAD))
    admin = aioredis.Redis.from_url(private_redis.url)
    await admin.execute_command("CLIENT", "PAUSE", "3000", "ALL")

    start = time.perf_counter()
    with pytest.raises(IndexUnavailableError):
        await index.lookup(chain(0))
    assert time.perf_counter() - start < 1.5  # the stall lasts 3 s

    workers = await _until(index.workers)  # the pause ends
    assert [w.info.worker_id for w in workers] == [A]
    await admin.aclose()
    await index.close()


async def _until(call, limit_s: float = 30.0):  # type: ignore[no-untyped-def]
    """``await call()`` until it does not raise IndexUnavailableError (at most ``limit_s``)."""
    deadline = time.monotonic() + limit_s
    while True:
        try:
            return await call()
        except IndexUnavailableError:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.05)


async def _first_answer(index: RedisPrefixIndex, timeout_s: float = 30.0) -> LookupResult:
    """The first lookup that succeeds: on a busy machine the first calls after a restart (reconnect,
    scripts loaded again) may outlast the index's short timeout; they must succeed soon after."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return await index.lookup(chain(0))
        except IndexUnavailableError:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.05)


async def test_index_recovers_after_a_redis_restart(private_redis: RedisServer) -> None:
    """A restart loses data and scripts: calls fail while it is down, then work again (scripts
    are reloaded) and the worker re-registers; its next batch starts a new sequence."""
    settings = IndexSettings(timeout_s=0.5)
    client = redis_client(private_redis.url, settings)
    index = RedisPrefixIndex(client, settings, ManualClock(), server_time=False)
    await index.start()
    await index.register(info(A), LOAD)
    await index.apply(batch(A, 1, *stored(chain(0), LONG)))

    private_redis.stop()
    with pytest.raises(IndexUnavailableError):
        await index.lookup(chain(0))
    private_redis.start()

    assert (await _first_answer(index)).matches == {}  # empty after the restart
    assert not await index.heartbeat(A, Epoch(1), LOAD)  # unknown: the worker must re-register
    await index.register(info(A), LOAD)
    assert (await index.apply(batch(A, 1, *stored(chain(0), LONG)))).ok
    assert (await index.lookup(chain(0))).chunks_for(A) == 1
    await index.close()
