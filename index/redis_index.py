"""Redis prefix index: one view shared by every gateway replica and worker of a deployment.

Every mutation is one Lua script on one shard, so each is atomic and costs one round trip (after
:meth:`RedisPrefixIndex.start` has loaded the scripts); a lookup is one script per key group,
pipelined. Every call is bounded by ``IndexSettings.timeout_s`` and raises
:class:`IndexUnavailableError` past it or when Redis is unreachable.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Sequence
from itertools import chain
from typing import Any, TypeVar

import xxhash
from redis.asyncio import Redis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import BusyLoadingError
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeout

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
    ttl_ms,
)
from kvgate.index.connect import close_redis
from kvgate.index.redis_url import mask_url
from kvgate.index.scripts import IndexScripts, LuaScript, run_group_calls
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
    """:class:`PrefixIndex` in Redis (one server, a primary behind Sentinel, or a Redis Cluster).
    Takes an open client; :meth:`close` closes it.

    Workers are spread over ``settings.groups`` key groups by a hash of their id; a group's keys
    share one hash tag, so every per-worker call is one script on one shard, and :meth:`lookup` and
    :meth:`workers` are one script per group, pipelined (one round trip per shard, in parallel).
    Times are Redis's own (``server_time``, the default) so that no writer's clock skews an
    expiry; ``clock`` then only measures durations (an event's expiry minus its writer's now) and
    maps Redis's times onto the caller's. ``server_time=False`` takes every time from ``clock``
    (tests that move time by hand).
    """

    def __init__(self, client: Redis, settings: IndexSettings, clock: Clock, *, server_time: bool = True,
                 url: str | None = None) -> None:  # fmt: skip
        """``url``: the client's URL, named (password masked) in every IndexUnavailableError."""
        self._client = client
        self._where = f"Redis at {mask_url(url)}" if url else "the Redis index"
        self._settings = settings
        self._clock = clock
        self._server_time = server_time
        self._scripts = IndexScripts()
        self._bad_records = BadRecords(log)
        self._prefixes = [f"{{{settings.namespace}:{g}}}" for g in range(settings.groups)]

    @property
    def client(self) -> Redis:
        """The open client, for others on the same Redis to share (the gateway's stored responses);
        :meth:`close` closes it."""
        return self._client

    async def start(self, timeout_s: float = 5.0) -> None:
        """Loads the scripts (waiting up to ``timeout_s`` for Redis); raises IndexUnavailableError."""
        await self._bounded(self._scripts.load_all(self._client), timeout_s)

    # -- workers ---------------------------------------------------------------------------

    async def register(self, info: WorkerInfo, load: WorkerLoad) -> None:
        args = (info.epoch, encode_info(info), encode_load(load), self._heartbeat_ms)
        reply = await self._run(self._scripts.register, info.worker_id, *args)
        if reply == "stale":
            raise StaleEpochError(f"{info.worker_id}: epoch {info.epoch} is older than the registered one")
        if reply == "taken":
            raise DuplicateWorkerError(TAKEN.format(info.worker_id, info.epoch))

    async def heartbeat(self, worker_id: WorkerId, epoch: Epoch, load: WorkerLoad) -> bool:
        reply = await self._run(
            self._scripts.heartbeat, worker_id, epoch, encode_load(load), self._heartbeat_ms
        )
        return bool(reply)

    async def deregister(self, worker_id: WorkerId, epoch: Epoch) -> None:
        await self._run(self._scripts.deregister, worker_id, epoch)

    async def purge(self, worker_id: WorkerId) -> int:
        return int(await self._run(self._scripts.purge, worker_id))  # type: ignore[call-overload]

    async def workers(self) -> list[WorkerStatus]:
        replies = await self._each_group(self._scripts.workers)
        found: list[WorkerStatus] = []
        for reply in replies:
            shift = self._clock.now_ms() - int(reply[0])  # Redis's time -> the caller's clock
            for w, deadline, info, load in _quads(reply[1:]):
                status = self._status(w, info or None, load or None, int(float(deadline)) + shift)
                if status is not None:
                    found.append(status)
        return sorted(found, key=lambda s: s.info.worker_id)

    def _status(self, wid: str, info: str | None, load: str | None, expires_ms: int) -> WorkerStatus | None:
        """A live worker's status, or None (skipped) when its records do not decode: one warning
        per bad record, however often it is read."""
        if info is None:
            return None
        try:
            decoded = decode_info(info)
            if decoded.worker_id != wid:
                raise RecordError(f"the record of {wid!r} names worker {decoded.worker_id!r}")
            ttl_ms = round(self._settings.heartbeat_ttl_s * 1000)
            return WorkerStatus(decoded, decode_load(load), expires_ms, expires_ms - ttl_ms)
        except RecordError as exc:
            self._bad_records.warn(wid, (info, load), exc)
            return None

    # -- events ----------------------------------------------------------------------------

    async def apply(self, batch: EventBatch) -> ApplyResult:
        now = self._clock.now_ms()
        events = chain.from_iterable(event_args(e, now) for e in batch.events)
        head = (batch.epoch, batch.seq, self._slack_ms)
        return _apply_result(await self._run(self._scripts.apply, batch.worker_id, *head, *events))

    async def resync(self, snapshot: Snapshot) -> ApplyResult:
        """Stages the snapshot in slices of ``resync_slice`` holdings (each one short script), then
        swaps it in at once: lookups see the old holdings or the new ones, never a mix."""
        now = self._clock.now_ms()
        holdings, size = snapshot.holdings, self._settings.resync_slice
        for start in range(0, len(holdings), size):
            part = chain.from_iterable(holding_args(h, now) for h in holdings[start : start + size])
            reply = await self._run(
                self._scripts.stage, snapshot.worker_id, snapshot.epoch, int(start == 0), *part
            )
            if reply != "ok":
                return ApplyResult(ApplyStatus(reply), SeqNo(0))
        longest = max((int(ttl_ms(h.expires_at_ms, now)) for h in holdings), default=0)
        args = (snapshot.epoch, snapshot.seq, self._slack_ms, max(longest, 0), int(bool(holdings)))
        return _apply_result(await self._run(self._scripts.commit, snapshot.worker_id, *args))

    # -- routing ---------------------------------------------------------------------------

    async def lookup(self, hashes: Sequence[ChunkHash]) -> LookupResult:
        if not hashes:
            return LookupResult(0, {})
        replies = await self._each_group(self._scripts.lookup, b"".join(hashes))
        matches: dict[WorkerId, PrefixMatch] = {}
        for reply in replies:
            for w, tiers in zip(reply[::2], reply[1::2], strict=True):
                matches[WorkerId(w)] = PrefixMatch(WorkerId(w), tiers)
        return LookupResult(len(hashes), matches)

    async def add_pending(
        self, hashes: Sequence[ChunkHash], worker_id: WorkerId, wait_s: float = 0.0
    ) -> None:
        if not hashes:
            return
        ttl = self._settings.pending_ms(wait_s)
        await self._run(self._scripts.add_pending, worker_id, ttl, *hashes)

    async def close(self) -> None:
        """Closes the client, within the index timeout (and a second): see :func:`close_redis`."""
        await close_redis(self._client, self._settings.timeout_s + 1.0)

    # -- internals -------------------------------------------------------------------------

    def group_prefix(self, worker_id: str) -> str:
        """The hash-tagged prefix of ``worker_id``'s keys: ``{<namespace>:<group>}``."""
        return self._prefixes[xxhash.xxh3_64_intdigest(worker_id.encode()) % len(self._prefixes)]

    def _now_arg(self) -> str:
        return "" if self._server_time else str(self._clock.now_ms())

    async def _run(self, script: LuaScript, worker_id: str, *args: str | int | bytes) -> Any:
        """``script`` on ``worker_id``'s group: ARGV = prefix, now, worker, *args."""
        prefix = self.group_prefix(worker_id)
        call = script(self._client, f"{prefix}:epochs", prefix, self._now_arg(), worker_id, *args)
        return await self._bounded(call)

    async def _each_group(self, script: LuaScript, *args: str | int | bytes) -> list[Any]:
        """``script`` on every group (ARGV = prefix, now, *args), pipelined."""
        now = self._now_arg()
        calls = [(f"{p}:epochs", (p, now, *args)) for p in self._prefixes]
        return await self._bounded(run_group_calls(self._client, script, calls))

    async def _bounded(self, call: Awaitable[T], timeout_s: float | None = None) -> T:
        try:
            async with asyncio.timeout(timeout_s or self._settings.timeout_s):
                return await call
        except _UNAVAILABLE as exc:
            reason = str(exc) or type(exc).__name__  # a timeout's message is empty
            raise IndexUnavailableError(f"{self._where} is unavailable: {reason}") from exc

    @property
    def _slack_ms(self) -> int:
        return round(self._settings.key_slack_s * 1000)

    @property
    def _heartbeat_ms(self) -> int:
        return round(self._settings.heartbeat_ttl_s * 1000)


def _quads(flat: list[Any]) -> list[tuple[str, str, str, str]]:
    return list(zip(flat[::4], flat[1::4], flat[2::4], flat[3::4], strict=True))


def _apply_result(reply: Any) -> ApplyResult:
    status, expected = reply
    return ApplyResult(ApplyStatus(status), SeqNo(int(expected)))
