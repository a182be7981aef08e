"""Worker records read from a real Redis are untrusted: a record from a newer kvgate (an unknown extra
field) is read with the field ignored; a garbage record is skipped with one warning, however often it
is read; and discovery keeps following the workers that do decode."""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import AsyncIterator

import pytest
import redis.asyncio as aioredis

from kvgate.common.clock import ManualClock
from kvgate.gateway.upstream.directory import WorkerDirectory
from kvgate.index import RedisPrefixIndex, redis_client
from kvgate.index.codec import encode_info, encode_load
from kvgate.proto.ids import WorkerId
from tests.index.conftest import drop_namespace, make_settings
from tests.index.helpers import LOAD, A, B, info

pytestmark = pytest.mark.redis

BAD = {
    "w-garbage": "{not json",
    "w-list": "[1, 2, 3]",
    "w-typed": json.dumps({**json.loads(encode_info(info(WorkerId("w-typed")))), "address": 5}),
    "w-impostor": encode_info(info(A)),  # filed under another worker's id
}


@pytest.fixture
async def index(redis_url: str) -> AsyncIterator[RedisPrefixIndex]:
    settings = make_settings(f"kvgate-test-{uuid.uuid4().hex[:12]}")
    index = RedisPrefixIndex(redis_client(redis_url, settings), settings, ManualClock(), server_time=False)
    await index.start()
    try:
        yield index
    finally:
        await index.close()
        await drop_namespace(redis_url, settings.namespace)


async def _write_beside(index: RedisPrefixIndex, url: str, records: dict[str, str]) -> None:
    """Writes ``records`` straight into Redis as live workers, next to worker A's real registration."""
    client = aioredis.Redis.from_url(url, decode_responses=True)
    try:
        deadline = await client.zscore(f"{index.group_prefix(A)}:live", A)
        for worker_id, record in records.items():
            group = index.group_prefix(worker_id)  # each record where the index looks for it
            await client.hset(f"{group}:info", worker_id, record)
            await client.hset(f"{group}:load", worker_id, encode_load(LOAD))
            await client.zadd(f"{group}:live", {worker_id: deadline})
    finally:
        await client.aclose()


def _newer_kvgate_record(worker: WorkerId) -> str:
    return json.dumps({**json.loads(encode_info(info(worker))), "zone": "eu-west-1b", "gpus": [0, 1]})


async def test_unknown_fields_are_ignored_and_bad_records_skipped_with_one_warning_each(
    index: RedisPrefixIndex, redis_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    await index.register(info(A), LOAD)
    await _write_beside(index, redis_url, {B: _newer_kvgate_record(B), **BAD})
    with caplog.at_level(logging.WARNING, logger="kvgate.index.redis_index"):
        for _ in range(3):
            workers = await index.workers()
            assert [w.info for w in workers] == [info(A), info(B)]
            assert workers[1].load == LOAD
    warned = [r.getMessage() for r in caplog.records if "does not decode" in r.getMessage()]
    assert len(warned) == len(BAD)
    assert all(any(repr(w) in m for m in warned) for w in BAD)


async def test_discovery_keeps_following_workers_beside_bad_records(
    index: RedisPrefixIndex, redis_url: str
) -> None:
    await index.register(info(A), LOAD)
    await index.register(info(B), LOAD)
    await _write_beside(index, redis_url, BAD)
    directory = WorkerDirectory(index, info(A).fingerprint)
    await directory.refresh()
    assert {w.info.worker_id for w in directory.known()} == {A, B}
    await index.deregister(A, info(A).epoch)  # a worker that leaves afterwards...
    await directory.refresh()
    assert {w.info.worker_id for w in directory.known()} == {B}  # ...disappears from the view
    assert not directory.degraded
