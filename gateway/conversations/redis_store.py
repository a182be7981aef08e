"""The response store in Redis: every gateway replica on one Redis sees the same stored responses, so
a continuation may reach any of them.

Keys (one hash tag per tenant, so a tenant's keys share a slot of a Redis Cluster):
``{<namespace>:<tenant>}:r:<id>``, the stored response as JSON, expiring after the TTL (Redis's own
expiry); ``{<namespace>:<tenant>}:order``, a sorted set of the tenant's ids by the time they were
stored, which trims the tenant to ``max_per_tenant`` (its oldest first). A response larger than
``max_bytes`` is not kept. The count and byte bounds over all tenants are not enforced here: Redis's
own ``maxmemory`` policy bounds the whole. Redis errors are UPSTREAM errors naming the store.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from redis.asyncio import Redis
from redis.exceptions import RedisError

from kvgate.gateway.conversations.store import ResponseStoreSettings, StoredResponse
from kvgate.gateway.errors import ErrorKind, GatewayError

T = TypeVar("T")


class RedisResponseStore:
    """Over an open asyncio client (string replies) that its owner closes; safe to share."""

    def __init__(self, client: Redis, settings: ResponseStoreSettings, clock: Callable[[], float],
                 namespace: str = "kvgate:responses") -> None:  # fmt: skip
        """``clock``: the wall clock (seconds) that orders a tenant's responses."""
        self._client = client
        self._settings = settings
        self._clock = clock
        self._namespace = namespace

    async def put(self, tenant: str, stored: StoredResponse) -> None:
        if stored.nbytes > self._settings.max_bytes:
            return
        turns, items = list(stored.turns), list(stored.input_items)
        record = {"response": stored.response, "turns": turns, "input_items": items}
        value = json.dumps(record, ensure_ascii=False)
        ttl_ms, now = int(self._settings.ttl_s * 1000), self._clock()
        order = self._key(tenant, "order")
        async with self._client.pipeline(transaction=True) as pipe:
            pipe.set(self._key(tenant, f"r:{stored.response_id}"), value, px=ttl_ms)
            pipe.zadd(order, {stored.response_id: now})
            pipe.zremrangebyscore(order, "-inf", now - self._settings.ttl_s)
            pipe.pexpire(order, ttl_ms)
            pipe.zrange(order, 0, -(self._settings.max_per_tenant + 1))  # the oldest beyond the share
            *_, overflow = await self._call(pipe.execute())
        if overflow:
            await self._call(self._forget(tenant, overflow))

    async def get(self, tenant: str, response_id: str) -> StoredResponse | None:
        found = await self._call(self._client.get(self._key(tenant, f"r:{response_id}")))
        if found is None:
            return None
        value: dict[str, Any] = json.loads(found)
        items = tuple(value.get("input_items", ()))  # absent in a record of an older gateway
        return StoredResponse(value["response"], tuple(value["turns"]), items)

    async def delete(self, tenant: str, response_id: str) -> bool:
        return await self._call(self._forget(tenant, [response_id])) > 0

    async def _forget(self, tenant: str, ids: list[str]) -> int:
        """Deletes ``ids`` of ``tenant``; how many of them were stored."""
        async with self._client.pipeline(transaction=True) as pipe:
            pipe.delete(*(self._key(tenant, f"r:{i}") for i in ids))
            pipe.zrem(self._key(tenant, "order"), *ids)
            deleted, _ = await pipe.execute()
        return int(deleted)

    def _key(self, tenant: str, name: str) -> str:
        return f"{{{self._namespace}:{tenant}}}:{name}"

    async def _call(self, call: Awaitable[T]) -> T:
        try:
            return await call
        except (RedisError, OSError) as exc:
            message = f"the stored responses are unavailable: Redis did not answer ({type(exc).__name__})"
            raise GatewayError(message, ErrorKind.UPSTREAM, code="response_store_unavailable") from exc
