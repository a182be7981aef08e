"""Open the index's Redis client from one URL, whatever stands behind it: one server, any node of a
Redis Cluster, or a primary watched by Sentinels (the URL forms are in :mod:`kvgate.index.redis_url`).

Every client has the options the index needs: string replies, socket and connect timeouts equal to
the index timeout, and no retries (the index bounds each call and falls back by itself). Options in
the URL's query win over these, as in redis-py's ``from_url``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from redis.asyncio import ConnectionPool, Redis, RedisCluster
from redis.asyncio.retry import Retry
from redis.asyncio.sentinel import MasterNotFoundError, Sentinel
from redis.backoff import NoBackoff
from redis.exceptions import InvalidResponse, NoPermissionError, RedisClusterException, RedisError

from kvgate.index.redis_url import RedisUrlError, is_sentinel_url, mask_url, node_options, parse_sentinel_url
from kvgate.index.types import IndexUnavailableError

T = TypeVar("T")
_UNREACHABLE = (RedisError, OSError, TimeoutError)
_log = logging.getLogger(__name__)
_CLOSE_S = 2.0  # for a client that never worked: its close has nothing to flush


async def close_redis(client: Redis | RedisCluster, timeout_s: float) -> None:
    """Closes ``client``'s connections, waiting at most ``timeout_s``: closing a connection waits
    for its transport to report the close, which a stalled peer or transport may never do, and a
    shutdown must not hang on it. Connections still closing then are left to the garbage collector
    (logged). Never raises for a failed close."""
    try:
        await asyncio.wait_for(client.aclose(), timeout_s)
    except TimeoutError:
        _log.warning("closing the Redis client took over %.1f s; left its connections to close", timeout_s)
    except _UNREACHABLE as exc:
        _log.warning("closing the Redis client failed: %s", exc)


class SentinelPrimary(Redis):
    """The client of a Sentinel-watched primary. Each new connection asks the Sentinels where the
    primary is, so after a failover the calls in flight fail and the next ones reach the new primary.
    :meth:`aclose` also closes the connections to the Sentinels."""

    sentinel: Sentinel | None = None

    async def aclose(self, close_connection_pool: bool | None = None) -> None:
        try:
            await super().aclose(close_connection_pool)
        finally:
            if self.sentinel is not None:
                await self.sentinel.aclose()


async def open_redis(url: str, *, timeout_s: float) -> Redis | RedisCluster:
    """A connected, checked client for ``url``; the caller owns it (``await client.aclose()``).

    - ``redis://``, ``rediss://``: asks the server ``INFO cluster``. A Cluster node (any one) gives a
      :class:`RedisCluster` that has discovered the others from it (database 0 only); any other
      server a plain :class:`Redis`. A server whose ACL forbids INFO counts as not a Cluster.
    - ``unix://``: a plain :class:`Redis` (a Cluster node is not reachable by a socket path).
    - ``redis+sentinel://``, ``rediss+sentinel://``: a :class:`SentinelPrimary` that follows failovers.

    One round trip or a few, each bounded by ``timeout_s``. Raises :class:`RedisUrlError` (a
    ValueError) for a malformed URL or one that cannot be used, :class:`IndexUnavailableError` when
    the server (or every Sentinel) does not answer in time or refuses the credentials. Both name the
    URL with its password masked."""
    if timeout_s <= 0:
        raise ValueError("timeout_s must be positive")
    if is_sentinel_url(url):
        return await _open_sentinel(url, timeout_s)
    return await _open_node(url, timeout_s)


def _index_options(timeout_s: float) -> dict[str, Any]:
    return {
        "decode_responses": True,
        "socket_timeout": timeout_s,
        "socket_connect_timeout": timeout_s,
        "retry": Retry(NoBackoff(), 0),
    }


async def _open_node(url: str, timeout_s: float) -> Redis | RedisCluster:
    options = {**_index_options(timeout_s), **node_options(url)}
    db = options.pop("db", 0)
    probe = _pooled(url, options)  # database 0: a Cluster node refuses SELECT
    await _checked(_handshake(probe), probe, url)
    if await _checked(_is_cluster_node(probe), probe, url):
        await probe.aclose()
        return await _open_cluster(url, options, db, timeout_s)
    if db == 0:
        await _checked(_pong(probe), probe, url)
        return probe
    await probe.aclose()
    client = _pooled(url, {**options, "db": db})
    await _checked(_pong(client), client, url)
    return client


def _pooled(url: str, options: dict[str, Any]) -> Redis:
    """What ``Redis.from_url`` builds, from options already parsed (and amended)."""
    return _build(url, lambda: Redis.from_pool(ConnectionPool(**options)))


async def _handshake(client: Redis) -> None:
    """Opens one connection of ``client``'s pool and returns it: the client's handshake (HELLO when it
    speaks RESP3, redis-py's default from 8.0; CLIENT SETINFO) runs here. InvalidResponse when the
    handshake's reply cannot be read as Redis's (a listener that answers ``+OK`` or ``:1`` to HELLO)."""
    pool = client.connection_pool
    try:
        connection = await pool.get_connection()
    except (AttributeError, ValueError) as exc:
        raise InvalidResponse(f"a reply to the connection handshake that is not Redis's ({exc})") from exc
    await pool.release(connection)


async def _is_cluster_node(client: Redis) -> bool:
    try:
        return str((await client.info("cluster")).get("cluster_enabled")) == "1"
    except NoPermissionError:  # the ACL forbids INFO: not a Cluster node, as far as we can tell
        return False
    except (AttributeError, ValueError) as exc:  # a reply INFO's parser cannot read (TypeError is
        # left to _checked: an option of the URL that the connection does not take)
        raise InvalidResponse(f"a reply to INFO that is not Redis's ({exc})") from exc


async def _pong(client: Redis) -> None:
    """PING; InvalidResponse unless the reply is PONG (a listener that answers anything with +OK)."""
    if await client.ping() is not True:
        raise InvalidResponse("a reply to PING other than PONG")


async def _open_cluster(url: str, options: dict[str, Any], db: int, timeout_s: float) -> RedisCluster:
    if "path" in options:
        raise RedisUrlError(url, "a Redis Cluster node: connect to it by its redis:// address")
    if db != 0:
        raise RedisUrlError(url, "a Redis Cluster node: a Cluster has only database 0")
    cluster = _build(url, lambda: RedisCluster.from_url(url, **_index_options(timeout_s)))
    await _checked(cluster.initialize(), cluster, url)
    return cluster


async def _open_sentinel(url: str, timeout_s: float) -> SentinelPrimary:
    parsed = parse_sentinel_url(url)
    options = _index_options(timeout_s)
    sentinel_options = {**options, **parsed.sentinel}  # without them, redis-py retries 3 times
    sentinel = Sentinel(parsed.sentinels, sentinel_kwargs=sentinel_options, **{**options, **parsed.primary})
    client = sentinel.master_for(parsed.service, redis_class=SentinelPrimary)
    client.sentinel = sentinel
    await _checked(client.ping(), client, url)
    return client


def _build(url: str, build: Callable[[], T]) -> T:
    """``build()``, with redis-py's complaints about the URL's options as RedisUrlError."""
    try:
        return build()
    except (TypeError, ValueError, RedisClusterException) as exc:  # an unknown option, say
        raise RedisUrlError(url, str(exc)) from None


async def _checked(call: Awaitable[T], client: Redis | RedisCluster, url: str) -> T:
    """``await call``; if the server does not answer, closes ``client`` and raises
    IndexUnavailableError naming the URL (masked) and the cause."""
    try:
        return await call
    except TypeError as exc:  # an option of the URL that the connection does not take
        await close_redis(client, _CLOSE_S)
        raise RedisUrlError(url, str(exc)) from None
    except _UNREACHABLE as exc:
        await close_redis(client, _CLOSE_S)
        raise IndexUnavailableError(f"Redis at {mask_url(url)} is unavailable: {_reason(exc)}") from exc


def _reason(exc: BaseException) -> str:
    if isinstance(exc, InvalidResponse):
        return f"what answers there does not speak the Redis protocol (is this Redis's port?): {exc}"
    if isinstance(exc, MasterNotFoundError):  # its message goes on with the repr of every Sentinel client
        return f"{str(exc).partition(' : ')[0]} (no Sentinel answered, or none watches that service)"
    return str(exc) or type(exc).__name__
