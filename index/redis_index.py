"""Redis prefix index: one view shared by every gateway replica and worker of a deployment.

Every mutation and every lookup is one Lua script, so each is atomic and costs one round trip
(after :meth:`RedisPrefixIndex.start` has loaded the scripts). Every call is bounded by
``IndexSettings.timeout_s`` and raises :class:`IndexUnavailableError` past it or when Redis is unreachable.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Sequence
from itertools import chain
from typing import TypeVar

from redis.asyncio import Redis
from redis.backoff import NoBackoff
from redis.exceptions import BusyLoadingError
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeout
from redis.retry import Retry

from kvgate.common.clock import Clock
from kvgate.index.codec import (
    BadRecords,
    RecordError,
    decode_info,
    decode_load,
    encode_info,
    encode_load,
    event_args,
    holding_args,
    ms13,
)
from kvgate.index.scripts import IndexScripts
from kvgate.index.settings import IndexSettings
from kvgate.index.types import (
    TAKEN,
    ApplyResult,
    ApplyStatus,
    DuplicateWorkerError,
    IndexUnavailableError,
    LookupResult,
    PrefixMatch,
    StaleEpochError,
    WorkerStatus,
)
from kvgate.proto.events import EventBatch, Snapshot
from kvgate.proto.ids import ChunkHash, Epoch, SeqNo, WorkerId
from kvgate.proto.workers import WorkerInfo, WorkerLoad

T = TypeVar("T")
log = logging.getLogger(__name__)
_UNAVAILABLE = (TimeoutError, RedisTimeout, RedisConnectionError, BusyLoadingError, OSError)


def redis_client(url: str, settings: IndexSettings) -> Redis:
    """An asyncio Redis client for the index: string replies, no retries, socket timeouts matched
    to the index timeout (``redis://``, ``rediss://`` with TLS, ``unix://`` URLs)."""
    return Redis.from_url(
        url,
        decode_responses=True,
        socket_timeout=settings.timeout_s,
        socket_connect_timeout=settings.timeout_s,
        retry=Retry(NoBackoff(), 0),
    )


class RedisPrefixIndex:
    """:class:`PrefixIndex` in Redis. Takes an open client; :meth:`close` closes it."""

    def __init__(self, client: Redis, settings: IndexSettings, clock: Clock) -> None:
        self._client = client
        self._settings = settings
        self._clock = clock
        self._ns = settings.namespace
        self._scripts = IndexScripts()
        self._bad_records = BadRecords(log)

    async def start(self, timeout_s: float = 5.0) -> None:
        """Loads the scripts (waiting up to ``timeout_s`` for Redis); raises IndexUnavailableError."""
        await self._bounded(self._scripts.load_all(self._client), timeout_s)

    # -- workers ---------------------------------------------------------------------------

    async def register(self, info: WorkerInfo, load: WorkerLoad) -> None:
        args = (info.worker_id, info.epoch, encode_info(info), encode_load(load), self._deadline())
        reply = await self._run(self._scripts.register, *args)
        if reply == "stale":
            raise StaleEpochError(f"{info.worker_id}: epoch {info.epoch} is older than the registered one")
        if reply == "taken":
            raise DuplicateWorkerError(TAKEN.format(info.worker_id, info.epoch))

    async def heartbeat(self, worker_id: WorkerId, epoch: Epoch, load: WorkerLoad) -> bool:
        args = (worker_id, epoch, encode_load(load), self._deadline())
        return bool(await self._run(self._scripts.heartbeat, *args))

    async def deregister(self, worker_id: WorkerId, epoch: Epoch) -> None:
        await self._run(self._scripts.deregister, worker_id, epoch)

    async def purge(self, worker_id: WorkerId) -> int:
        return int(await self._run(self._scripts.purge, worker_id))

    async def workers(self) -> list[WorkerStatus]:
        pipe = self._client.pipeline(transaction=False)
        pipe.hgetall(f"{self._ns}:info")
        pipe.hgetall(f"{self._ns}:load")
        pipe.zrangebyscore(f"{self._ns}:live", f"({self._clock.now_ms()}", "+inf", withscores=True)
        infos, loads, live = await self._bounded(pipe.execute())
        ttl_ms = round(self._settings.heartbeat_ttl_s * 1000)
        found = [self._status(w, infos.get(w), loads.get(w), int(d), ttl_ms) for w, d in sorted(live)]
        return [status for status in found if status is not None]

    def _status(self, wid: str, info: str | None, load: str | None, expires_ms: int, ttl_ms: int
                ) -> WorkerStatus | None:  # fmt: skip
        """A live worker's status, or None (skipped) when its records do not decode: one warning
        per bad record, however often it is read."""
        if info is None:
            return None
        try:
            decoded = decode_info(info)
            if decoded.worker_id != wid:
                raise RecordError(f"the record of {wid!r} names worker {decoded.worker_id!r}")
            return WorkerStatus(decoded, decode_load(load), expires_ms, expires_ms - ttl_ms)
        except RecordError as exc:
            self._bad_records.warn(wid, (info, load), exc)
            return None

    # -- events ----------------------------------------------------------------------------

    async def apply(self, batch: EventBatch) -> ApplyResult:
        events = chain.from_iterable(event_args(e) for e in batch.events)
        reply = await self._run(self._scripts.apply, *self._batch_head(batch), *events)
        return _apply_result(reply)

    async def resync(self, snapshot: Snapshot) -> ApplyResult:
        holdings = chain.from_iterable(holding_args(h) for h in snapshot.holdings)
        reply = await self._run(self._scripts.resync, *self._batch_head(snapshot), *holdings)
        return _apply_result(reply)

    # -- routing ---------------------------------------------------------------------------

    async def lookup(self, hashes: Sequence[ChunkHash]) -> LookupResult:
        if not hashes:
            return LookupResult(0, {})
        reply = await self._run(self._scripts.lookup, ms13(self._clock.now_ms()), b"".join(hashes).hex())
        pairs = zip(reply[::2], reply[1::2], strict=True)
        return LookupResult(len(hashes), {WorkerId(w): PrefixMatch(WorkerId(w), t) for w, t in pairs})

    async def add_pending(self, hashes: Sequence[ChunkHash], worker_id: WorkerId) -> None:
        if not hashes:
            return
        ttl_ms = round(self._settings.pending_ttl_s * 1000)
        deadline = self._clock.now_ms() + ttl_ms
        hexes = (h.hex() for h in hashes)
        await self._run(self._scripts.add_pending, worker_id, ms13(deadline), ttl_ms, *hexes)

    async def close(self) -> None:
        await self._client.aclose()

    # -- internals -------------------------------------------------------------------------

    async def _run(self, script, *args: str | int) -> object:
        return await self._bounded(script(self._client, self._ns, *args))

    async def _bounded(self, call: Awaitable[T], timeout_s: float | None = None) -> T:
        try:
            async with asyncio.timeout(timeout_s or self._settings.timeout_s):
                return await call
        except _UNAVAILABLE as exc:
            raise IndexUnavailableError(f"redis index unavailable: {exc!r}") from exc

    def _batch_head(self, batch: EventBatch | Snapshot) -> tuple[str | int, ...]:
        slack_ms = round(self._settings.key_slack_s * 1000)
        return batch.worker_id, batch.epoch, batch.seq, self._clock.now_ms(), slack_ms

    def _deadline(self) -> int:
        return self._clock.now_ms() + round(self._settings.heartbeat_ttl_s * 1000)


def _apply_result(reply: object) -> ApplyResult:
    status, expected = reply  # type: ignore[misc]
    return ApplyResult(ApplyStatus(status), SeqNo(int(expected)))
