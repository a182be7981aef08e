"""The index fixtures: every test in the shared suite runs once per backend."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest
import redis.asyncio as aioredis

from kvgate.common.clock import ManualClock
from kvgate.index import IndexSettings, MemoryPrefixIndex, PrefixIndex, RedisPrefixIndex, redis_client

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


@pytest.fixture(params=["memory", pytest.param("redis", marks=pytest.mark.redis)])
async def backend(request: pytest.FixtureRequest) -> AsyncIterator[Backend]:
    clock = ManualClock()
    if request.param == "memory":
        settings = make_settings()
        yield Backend("memory", MemoryPrefixIndex(settings, clock), clock, settings)
        return
    url = request.getfixturevalue("redis_url")
    settings = make_settings(f"kvgate-test-{uuid.uuid4().hex[:12]}")
    index = RedisPrefixIndex(redis_client(url, settings), settings, clock, server_time=False)
    await index.start()
    try:
        yield Backend("redis", index, clock, settings)
    finally:
        await index.close()
        await drop_namespace(url, settings.namespace)
