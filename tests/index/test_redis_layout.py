"""The Redis index's layout: Redis's own time (no writer's clock skews an expiry), snapshots written in
bounded slices and swapped in at once, workers spread over hash-tagged key groups."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Callable

import pytest
import redis.asyncio as aioredis
from redis.crc import key_slot

from kvgate.common.clock import SystemClock
from kvgate.index import IndexSettings, RedisPrefixIndex, redis_client
from kvgate.proto.events import Holding
from kvgate.proto.ids import Tier, WorkerId
from tests.index.conftest import drop_namespace
from tests.index.helpers import LOAD, A, B, batch, chain, info, snapshot, stored
from tests.support.fake_clock import SkewedClock

pytestmark = pytest.mark.redis


@pytest.fixture
async def open_index(redis_url: str) -> AsyncIterator[Callable[..., RedisPrefixIndex]]:
    namespace = f"kvgate-test-{uuid.uuid4().hex[:12]}"
    opened: list[RedisPrefixIndex] = []

    def make(clock=None, **overrides) -> RedisPrefixIndex:
        settings = IndexSettings(namespace=namespace, timeout_s=2.0, **overrides)
        index = RedisPrefixIndex(redis_client(redis_url, settings), settings, clock or SystemClock())
        opened.append(index)
        return index

    yield make
    for index in opened:
        await index.close()
    await drop_namespace(redis_url, namespace)


@pytest.mark.parametrize("skew_s", [5, -5])
async def test_a_worker_with_a_skewed_clock_is_live_and_its_holdings_last_their_ttl(
    open_index: Callable[..., RedisPrefixIndex], skew_s: int
) -> None:
    worker = open_index(SkewedClock(skew_s * 1000))
    gateway = open_index(SkewedClock(-skew_s * 1000))  # 10 s apart: the heartbeat TTL
    await worker.register(info(A), LOAD)
    hashes = chain(0, 1)
    await worker.apply(batch(A, 1, *stored(hashes, SystemClock().now_ms() + skew_s * 1000 + 800)))
    written = time.monotonic()

    statuses = await gateway.workers()
    assert [s.info.worker_id for s in statuses] == [A]
    # times come back on the reader's clock: the heartbeat was "just now" for the gateway
    assert abs(statuses[0].heartbeat_at_ms - gateway._clock.now_ms()) < 2000
    assert (await gateway.lookup(hashes)).chunks_for(A) == 2

    while (await gateway.lookup(hashes)).chunks_for(A):  # lapses after 0.8 s of Redis's time
        assert time.monotonic() - written < 3.0, "the holding outlived its TTL"
        await asyncio.sleep(0.05)
    assert time.monotonic() - written >= 0.7


async def test_a_snapshot_is_written_in_slices_and_swapped_in_at_once(
    open_index: Callable[..., RedisPrefixIndex], monkeypatch: pytest.MonkeyPatch
) -> None:
    worker = open_index(resync_slice=100)
    gateway = open_index()
    await worker.register(info(A), LOAD)
    old, new = chain(*range(10)), chain(*range(1000, 1250))
    await worker.apply(batch(A, 1, *stored(old, 10**15)))
    seen: list[tuple[int, int]] = []
    stage = worker._scripts.stage

    async def watched_stage(*args):  # what a reader sees between two slices
        reply = await stage(*args)
        found = await gateway.lookup(old), await gateway.lookup(new)
        seen.append((found[0].chunks_for(A), found[1].chunks_for(A)))
        return reply

    monkeypatch.setattr(worker._scripts, "stage", watched_stage)
    result = await worker.resync(snapshot(A, 7, [Holding(h, Tier.CPU, 10**15) for h in new]))

    assert result.ok
    assert result.expected_seq == 8
    assert seen == [(10, 0)] * 3  # three slices; until the swap the old holdings stand whole
    assert (await gateway.lookup(old)).matches == {}
    assert (await gateway.lookup(new)).matches[A].tiers == "C" * 250
    assert (await worker.apply(batch(A, 8, *stored(old[:1], 10**15)))).ok


async def test_workers_are_spread_over_hash_tagged_groups(
    open_index: Callable[..., RedisPrefixIndex], redis_url: str
) -> None:
    index = open_index(groups=8)
    workers = [WorkerId(f"w-{i}") for i in range(32)]
    for w in workers:
        await index.register(info(w), LOAD)
        await index.apply(batch(w, 1, *stored(chain(w), 10**15)))
    prefixes = {index.group_prefix(w) for w in workers}
    assert len(prefixes) >= 6  # 32 ids over 8 groups
    raw = aioredis.Redis.from_url(redis_url)
    try:
        for w in workers:  # every key of a worker carries its group's tag: one slot of a cluster
            tag = index.group_prefix(w)
            assert await raw.exists(f"{tag}:h:{w}")
            keys = [f"{tag}:{k}".encode() for k in (f"h:{w}", f"p:{w}", "live", "epochs", "info")]
            assert len({key_slot(k) for k in keys}) == 1
    finally:
        await raw.aclose()
    assert len({key_slot(p.encode()) for p in prefixes}) == len(prefixes)
    assert [s.info.worker_id for s in await index.workers()] == sorted(workers)
    assert set((await index.lookup(chain(workers[5]))).matches) == {workers[5]}


async def test_purge_and_deregister_free_a_large_holding_in_one_short_call(
    open_index: Callable[..., RedisPrefixIndex],
) -> None:
    index = open_index()
    await index.register(info(A), LOAD)
    await index.register(info(B), LOAD)
    hashes = chain(*range(3000))
    await index.apply(batch(A, 1, *stored(hashes, 10**15)))
    await index.apply(batch(B, 1, *stored(hashes, SystemClock().now_ms() - 1)))  # already expired
    assert await index.purge(A) == 3000
    assert await index.purge(B) == 0  # expired holdings are not counted as dropped
    assert (await index.lookup(hashes[:5])).matches == {}
