"""One suite, run against every response store (in memory; in a real Redis): responses found only by
their tenant, deletes that are idempotent, the TTL, one tenant's share, and a response too large to
keep. What only the in-memory store bounds (counts and bytes over all tenants) is in
``test_response_store.py``."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Callable

import pytest
from redis.asyncio import Redis

from kvgate.gateway.conversations import (
    MemoryResponseStore,
    RedisResponseStore,
    ResponseStore,
    ResponseStoreSettings,
    StoredResponse,
)
from kvgate.gateway.errors import ErrorKind, GatewayError

MakeStore = Callable[..., ResponseStore]


def response(rid: str, text: str = "hello") -> StoredResponse:
    turns = ({"role": "user", "content": text}, {"role": "assistant", "content": "hi"})
    part = {"type": "input_text", "text": text}
    items = ({"id": "msg_1", "type": "message", "role": "user", "content": [part]},)  # its input items
    return StoredResponse({"id": rid, "object": "response", "output": [{"type": "message"}]}, turns, items)


@pytest.fixture(params=["memory", "redis"])
async def make_store(request: pytest.FixtureRequest) -> AsyncIterator[MakeStore]:
    """Stores with the given bounds, of the parameter's kind (each Redis one in a namespace of its own)."""
    if request.param == "memory":
        yield lambda **bounds: MemoryResponseStore(ResponseStoreSettings(**bounds), time.monotonic)
        return
    client = Redis.from_url(request.getfixturevalue("redis_url"), decode_responses=True)
    yield lambda **bounds: RedisResponseStore(client, ResponseStoreSettings(**bounds), time.time,
                                              namespace=f"test:{uuid.uuid4().hex}")  # fmt: skip
    await client.aclose()


async def test_a_response_is_found_by_its_tenant_only(make_store: MakeStore) -> None:
    kept = make_store()
    await kept.put("acme", response("resp_1"))
    assert await kept.get("acme", "resp_1") == response("resp_1")
    assert await kept.get("beta", "resp_1") is None
    assert await kept.delete("beta", "resp_1") is False  # another tenant's delete touches nothing
    assert await kept.get("acme", "resp_1") == response("resp_1")


async def test_delete_forgets_and_is_idempotent(make_store: MakeStore) -> None:
    kept = make_store()
    await kept.put("acme", response("resp_1"))
    assert await kept.delete("acme", "resp_1") is True
    assert await kept.get("acme", "resp_1") is None
    assert await kept.delete("acme", "resp_1") is False


async def test_a_put_of_the_same_id_replaces_it(make_store: MakeStore) -> None:
    kept = make_store()
    await kept.put("acme", response("resp_1", "first"))
    await kept.put("acme", response("resp_1", "second"))
    assert await kept.get("acme", "resp_1") == response("resp_1", "second")


async def test_a_response_is_gone_after_the_ttl(make_store: MakeStore) -> None:
    kept = make_store(ttl_s=0.3)
    await kept.put("acme", response("resp_1"))
    assert await kept.get("acme", "resp_1") is not None
    deadline = time.monotonic() + 5
    while await kept.get("acme", "resp_1") is not None:
        assert time.monotonic() < deadline, "still there long after its TTL"
        await asyncio.sleep(0.05)


async def test_one_tenant_keeps_only_its_share_its_oldest_out_first(make_store: MakeStore) -> None:
    kept = make_store(max_per_tenant=2)
    await kept.put("beta", response("resp_beta"))
    for i in range(5):
        await kept.put("acme", response(f"resp_{i}"))
        await asyncio.sleep(0.002)  # distinct times
    assert await kept.get("beta", "resp_beta") is not None
    assert [await kept.get("acme", f"resp_{i}") is not None for i in range(5)] == [False] * 3 + [True] * 2


async def test_a_response_larger_than_the_byte_bound_is_not_kept(make_store: MakeStore) -> None:
    kept = make_store(max_bytes=4096)
    await kept.put("acme", response("resp_huge", "x" * 5000))
    assert await kept.get("acme", "resp_huge") is None
    await kept.put("acme", response("resp_small"))
    assert await kept.get("acme", "resp_small") is not None


async def test_a_redis_that_does_not_answer_is_an_upstream_error() -> None:
    client = Redis.from_url("redis://127.0.0.1:1/0", decode_responses=True, socket_connect_timeout=0.5)
    kept = RedisResponseStore(client, ResponseStoreSettings(), time.time)
    try:
        for call in (
            kept.get("acme", "resp_1"),
            kept.put("acme", response("resp_1")),
            kept.delete("acme", "r"),
        ):
            with pytest.raises(GatewayError) as failed:
                await call
            assert failed.value.kind is ErrorKind.UPSTREAM
            assert "Redis" in failed.value.message
    finally:
        await client.aclose()
