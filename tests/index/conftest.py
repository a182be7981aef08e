"""The index fixtures: every test in the shared suite runs once per backend."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest
import redis.asyncio as aioredis

from kvgate.common.clock import ManualClock
from kvgate.index import IndexSettings, MemoryPrefixIndex, PrefixIndex, RedisPrefixIndex
from kvgate.index.connect import open_redis

# Generous: the shared suite checks behaviour, not speed, on a noisy 2-core machine.
SUITE_TIMEOUT_S = 2.0


@dataclass
class Backend:
    """One index under test plus the clock it runs on."""

    name: str
    index: PrefixIndex
    clock: ManualClock
    settings: IndexSettings


def make_settings(namespace: str = "kvgate") -> IndexSettings:
    return IndexSettings(
        namespace=namespace, timeout_s=SUITE_TIMEOUT_S, heartbeat_ttl_s=10, pending_ttl_s=2, key_slack_s=60
    )


async def drop_namespace(url: str, namespace: str) -> None:
    client = aioredis.Redis.from_url(url)
    try:
        keys = [key async for key in client.scan_iter(match=f"{{{namespace}:*", count=1000)]
        if keys:
            await client.delete(*keys)
    finally:
        await client.aclose()


# Redis: one server, a 3-master Redis Cluster (from one node's URL), a primary behind Sentinel.
_REDIS_URLS = {
    "redis": "redis_url",
    "redis-cluster": "redis_cluster_url",
    "redis-sentinel": "redis_sentinel_url",
}


@pytest.fixture(params=["memory", *(pytest.param(name, marks=pytest.mark.redis) for name in _REDIS_URLS)])
async def backend(request: pytest.FixtureRequest) -> AsyncIterator[Backend]:
    clock = ManualClock()
    if request.param == "memory":
        settings = make_settings()
        yield Backend("memory", MemoryPrefixIndex(settings, clock), clock, settings)
        return
    url = request.getfixturevalue(_REDIS_URLS[request.param])
    settings = make_settings(f"kvgate-test-{uuid.uuid4().hex[:12]}")
    client = await open_redis(url, timeout_s=SUITE_TIMEOUT_S)
    index = RedisPrefixIndex(client, settings, clock, server_time=False)
    await index.start()
    try:
        yield Backend(request.param, index, clock, settings)
    finally:
        await drop_keys(client, settings.namespace)
        await index.close()


async def drop_keys(client, namespace: str) -> None:
    """Deletes a namespace's keys through the index's own client (every node of a cluster)."""
    nodes = client.get_primaries() if hasattr(client, "get_primaries") else [None]
    for node in nodes:
        where = {"target_nodes": node} if node else {}
        scan = client.scan_iter(match=f"{{{namespace}:*", count=1000, **where)
        for key in [k async for k in scan]:
            await client.delete(key)
