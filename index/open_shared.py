"""The shared (Redis) index opened from one URL by a process that must start even while Redis is down
(a worker keeps serving, a gateway routes to the workers it can follow)."""

from __future__ import annotations

import asyncio
import logging

from kvgate.common.clock import Clock
from kvgate.index.connect import open_redis
from kvgate.index.redis_index import RedisPrefixIndex, redis_client
from kvgate.index.redis_url import is_sentinel_url, mask_url
from kvgate.index.settings import IndexSettings
from kvgate.index.types import IndexUnavailableError

log = logging.getLogger(__name__)


async def open_shared_index(
    url: str, settings: IndexSettings, clock: Clock, *, wait_s: float = 5.0
) -> RedisPrefixIndex:
    """A started :class:`RedisPrefixIndex` on whatever ``url`` names (one server, any node of a
    Redis Cluster, a Sentinel URL), waiting up to ``wait_s`` for it to answer.

    When it still does not answer, a ``redis://`` URL gets a single-server client that connects on
    first use (what stands behind the URL cannot be known yet: a Redis Cluster must answer when the
    process starts), with a warning; a Sentinel URL raises :class:`IndexUnavailableError`. A
    malformed URL raises :class:`~kvgate.index.redis_url.RedisUrlError`."""
    deadline = asyncio.get_running_loop().time() + wait_s
    while True:
        try:
            client = await open_redis(url, timeout_s=max(settings.timeout_s, 1.0))
            break
        except IndexUnavailableError as exc:
            if asyncio.get_running_loop().time() >= deadline:
                if is_sentinel_url(url):
                    raise
                log.warning("Redis at %s does not answer (%s); connecting when it does", mask_url(url), exc)
                return RedisPrefixIndex(redis_client(url, settings), settings, clock, url=url)
            await asyncio.sleep(0.5)
    # opened with a generous socket timeout (discovering a cluster takes a few round trips); the
    # index bounds each of its calls with its own timeout anyway
    index = RedisPrefixIndex(client, settings, clock, url=url)
    await index.start()
    return index
