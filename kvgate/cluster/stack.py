"""The three ways to run the cluster layer, each owning what it starts and stopping it in reverse:

- :func:`run_up`: Ray (joined or local), the worker actors and a gateway in one process tree; the index
  is embedded (the gateway follows every worker's event stream) or, with a Redis URL, shared;
- :func:`run_workers`: only the worker actors, publishing to Redis, until interrupted;
- :func:`run_gateway`: only a gateway replica, discovering workers through Redis.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

from kvgate.cluster.gateway_server import Listening, serve_gateway
from kvgate.cluster.preflight import check_ports, check_redis
from kvgate.cluster.progress import say
from kvgate.cluster.ray_session import RaySession, local_cpus
from kvgate.cluster.settings import ClusterSettings
from kvgate.cluster.shutdown import stop_on_signals, unless_stopped
from kvgate.common.clock import SystemClock
from kvgate.common.tokenizer import load_tokenizer
from kvgate.gateway.compose import build_gateway
from kvgate.gateway.conversations import RedisResponseStore
from kvgate.gateway.routing.overrides import routing_summary
from kvgate.gateway.settings import GatewaySettings, Limits
from kvgate.index import (
    IndexSettings,
    MemoryPrefixIndex,
    PrefixIndex,
)
from kvgate.index.event_feed import EventFeed
from kvgate.index.open_shared import open_shared_index
from kvgate.index.replicated import ReplicatedIndex
from kvgate.proto.workers import WorkerInfo

if TYPE_CHECKING:
    from redis.asyncio import Redis

    from kvgate.cluster.worker_pool import OnChange


def run_up(settings: ClusterSettings) -> int:
    """``kvgate up``: blocks until Ctrl-C / SIGTERM; 0 after a clean stop, 1 if the workers never
    became ready. Fails fast (StartupError) when a gateway port is taken or the Redis index does not
    answer, before Ray starts or any model loads."""
    _check_gateway_ports(settings)
    if settings.redis_url is not None:
        check_redis(settings.redis_url)
    return _with_ray(settings, _up)


def run_workers(settings: ClusterSettings) -> int:
    """``kvgate workers``: places the workers on the Ray cluster and keeps them alive until interrupted."""
    if settings.redis_url is None:
        raise ValueError("kvgate workers needs --redis-url (gateways find the workers there)")
    return _with_ray(settings, _workers)


def run_gateway(settings: ClusterSettings) -> int:
    """``kvgate gateway``: a gateway replica over the Redis index, until interrupted."""
    if settings.redis_url is None:
        raise ValueError("kvgate gateway needs --redis-url (it finds the workers there)")
    _check_gateway_ports(settings)
    return asyncio.run(_gateway(settings))


def _check_gateway_ports(settings: ClusterSettings) -> None:
    ports = {"HTTP": (settings.port, "--port"), "gRPC": (settings.grpc_port, "--grpc-port")}
    check_ports(settings.host, ports)


Main = Callable[[ClusterSettings, RaySession], Awaitable[int]]

# measured with the default model (README, "What speed to expect"): so that a first request on CPU,
# silent for tens of seconds, does not look hung
CPU_SPEED_NOTE = (
    "on CPU, prefill runs at roughly 240 tokens/s per worker thread with the default 135M model (larger "
    "models are slower): a cold 2,000-token prompt waits ~10 s for its first token; a cached prefix is "
    "not computed again"
)


def _with_ray(settings: ClusterSettings, main: Main) -> int:
    needed = (settings.workers or 2) * settings.cpus_per_worker
    say(f"joining Ray at {settings.ray_address}" if settings.ray_address else "starting a local Ray instance")
    session = RaySession.open(
        settings.ray_address, num_cpus=local_cpus(needed), temp_dir=settings.ray_temp_dir
    )
    try:
        return asyncio.run(main(settings, session))
    finally:
        say("stopping Ray" if session.started else "leaving the Ray cluster")
        session.close()


async def _up(settings: ClusterSettings, session: RaySession) -> int:
    stop = stop_on_signals()
    async with _index(settings) as (index, redis):
        embedded = settings.redis_url is None
        feed = _feed(index, settings) if embedded else None
        async with _pool(settings, session, feed, stop) as ready:
            try:
                if ready:
                    await _serve(settings, index, stop, redis)
            finally:  # before the workers stop: their ending streams are no loss then
                if feed is not None:
                    await feed.close()
            return 0 if ready or stop.is_set() else 1


async def _workers(settings: ClusterSettings, session: RaySession) -> int:
    stop = stop_on_signals()
    async with _pool(settings, session, None, stop) as ready:
        if ready:
            say(f"{len(ready)} workers publishing to the Redis index; Ctrl-C stops them")
            await stop.wait()
        return 0 if ready or stop.is_set() else 1


async def _gateway(settings: ClusterSettings) -> int:
    stop = stop_on_signals()
    async with _index(settings) as (index, redis):
        await _serve(settings, index, stop, redis)
    return 0


@asynccontextmanager
async def _pool(
    settings: ClusterSettings, session: RaySession, feed: EventFeed | None, stop: asyncio.Event
) -> AsyncIterator[list[WorkerInfo] | None]:
    """Places the workers and yields their records once all started (None: stopped before, or failed);
    stops them on exit."""
    from kvgate.cluster.worker_pool import WorkerPool  # imports torch: only where workers are placed
    from kvgate.cluster.worker_specs import Placement, actor_specs

    gpus = session.gpus()
    count = settings.worker_count(gpus)
    say(f"placing {count} worker(s) ({'1 GPU' if gpus else f'{settings.cpus_per_worker} CPU'} each)")
    if not gpus:
        say(CPU_SPEED_NOTE)
    pool = WorkerPool(_follower(feed) if feed is not None else None)
    try:
        pool.place(actor_specs(settings, count, gpu=bool(gpus)), Placement.for_cluster(settings, gpus))
        waiting = asyncio.ensure_future(pool.wait_ready(settings.ready_timeout_s))
        try:
            ready = await unless_stopped(stop, waiting)
        except (RuntimeError, TimeoutError) as exc:
            say(f"error: {exc}")
            ready = None
        yield ready
    finally:
        say("stopping the workers")
        await pool.stop()


def _follower(feed: EventFeed) -> OnChange:
    async def follow(old: WorkerInfo | None, new: WorkerInfo) -> None:
        if old is not None and old.address != new.address:
            await feed.unfollow(old.address)
        feed.follow(new.address)

    return follow


@asynccontextmanager
async def _index(settings: ClusterSettings) -> AsyncIterator[tuple[PrefixIndex, Redis | None]]:
    """The gateway's index: in-process, or a replica of the shared Redis one (membership from Redis,
    holdings from each worker's own event stream), with the shared index's Redis client (None without
    Redis), which the index closes. Closed on exit."""
    index_settings = IndexSettings()
    redis: Redis | None = None
    if settings.redis_url is None:
        index: PrefixIndex = MemoryPrefixIndex(index_settings, SystemClock())
    else:
        shared = await open_shared_index(settings.redis_url, index_settings, SystemClock())
        replica = MemoryPrefixIndex(index_settings, SystemClock())
        feed = _feed(replica, settings)
        index = ReplicatedIndex(shared, replica, feed, settings.cache.secret)
        redis = shared.client
    try:
        yield index, redis
    finally:
        await index.close()


async def _serve(
    settings: ClusterSettings, index: PrefixIndex, stop: asyncio.Event, redis: Redis | None
) -> None:
    """Builds the gateway over ``index`` and serves it until ``stop``; says where clients connect.
    With ``redis``, the Responses API's stored responses are kept there, shared by every gateway
    replica on it; without, in this gateway's memory."""
    tokenizer = await asyncio.to_thread(load_tokenizer, settings.model_path)
    # the in-process index (embedded, or a replica) is read every 100 ms: the workers push their load
    # that often, and the shared index behind a replica is asked once a second
    config = _gateway_settings(settings)
    responses = RedisResponseStore(redis, config.responses, time.time) if redis is not None else None
    gateway = build_gateway(config, index, tokenizer, refresh_s=0.1, clock=SystemClock(), responses=responses)
    ready: asyncio.Future[Listening] = asyncio.get_running_loop().create_future()
    ready.add_done_callback(lambda f: f.cancelled() or f.exception() or _announce(settings, f.result()))
    try:
        await serve_gateway(gateway, settings.host, settings.port, settings.grpc_port, stop, ready)
    finally:
        say("gateway stopped")


def _feed(index: PrefixIndex, settings: ClusterSettings) -> EventFeed:
    """The workers' event streams into ``index``: admissions keep their chunks pending for the
    prefill queue they report, at the rate the gateway's routing assumes."""
    rate = _gateway_settings(settings).routing.prefill_tokens_per_s
    return EventFeed(index, tls=settings.tls, secret=settings.cache.secret, prefill_tokens_per_s=rate)


def _gateway_settings(settings: ClusterSettings) -> GatewaySettings:
    window = settings.kv.max_model_len
    limits = Limits(context_window=window, max_output_tokens=min(Limits().max_output_tokens, window - 1))
    return GatewaySettings(
        settings.model_name,
        settings.cache,
        policy=settings.policy,
        routing=settings.routing,
        limits=limits,
        keys=settings.keys,
        max_concurrent_requests=settings.max_concurrent_requests,
        http_timeouts=settings.http_timeouts,
        admin_keys=settings.admin_keys,
        shutdown_grace_s=settings.shutdown_grace_s,
        worker_tls=settings.tls,
    )


def _announce(settings: ClusterSettings, where: Listening) -> None:
    key = "<your tenant's key>" if settings.keys is not None else "unused"
    print(
        f"kvgate is ready: model {settings.model_name!r}\n"
        f"  OPENAI_BASE_URL={where.base_url} OPENAI_API_KEY={key}\n"
        f"  model: {settings.model_name}\n"
        f"  gRPC (kvgate.v1.KVGateway): {where.host}:{where.grpc_port}\n"
        f"  routing: {routing_summary(settings.policy, settings.routing)}\n"
        "Ctrl-C stops everything.",
        flush=True,
    )
