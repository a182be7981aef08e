"""``WorkerActor``: one kvgate worker as an async Ray actor, restarted by Ray when it dies.

The cluster layer creates the actor (``max_restarts``) and calls :meth:`WorkerActor.start`, which is
idempotent: after a restart Ray runs the constructor again but nothing else, so the owner keeps calling
``start`` and learns the new incarnation (fresh epoch, maybe a new address) from its answer.

Each incarnation serves on its node's IP (``ray.util.get_node_ip_address()``) under a fresh epoch (the
wall clock in ms, so it grows across restarts). A watchdog exits the process (``os._exit``: an
intentional ``exit_actor`` would not be restarted) when the engine breaks or, with a shared index, when
a newer epoch of the same worker id superseded this one.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from dataclasses import dataclass, field, replace

import ray

from kvgate.common.clock import SystemClock
from kvgate.index import IndexSettings, RedisPrefixIndex
from kvgate.index.open_shared import open_shared_index
from kvgate.proto.ids import Epoch
from kvgate.proto.workers import WorkerInfo
from kvgate.workers.service import WorkerConfig, WorkerServer

log = logging.getLogger(__name__)

WATCH_PERIOD_S = 1.0
EXIT_CODE_BROKEN = 3


@dataclass(frozen=True, slots=True)
class ActorSpec:
    """What every incarnation of one worker slot is built from.

    ``config``: the worker's settings; its ``epoch``, ``host``, ``advertise_host``, ``node_id`` and
    (unless set) ``torch_threads`` are replaced per incarnation. ``redis_url``: publish to this shared
    index (None: embedded mode, the gateway follows the worker's event stream instead). ``index``: the
    worker's index settings; publishing is off the request path, so its timeout is far longer than a
    gateway's lookup timeout (a loaded machine must not turn every write into a resync)."""

    config: WorkerConfig
    redis_url: str | None = None
    index: IndexSettings = field(default_factory=lambda: IndexSettings(timeout_s=1.0))


def fresh_epoch() -> Epoch:
    """The wall clock in milliseconds: higher than any earlier incarnation's (restarts take > 1 ms)."""
    return Epoch(time.time_ns() // 1_000_000)


def assigned_cpus() -> int:
    """The whole CPUs Ray gave this actor (at least 1): the torch thread count."""
    resources = ray.get_runtime_context().get_assigned_resources()
    return max(1, int(resources.get("CPU", 1)))


class WorkerActor:
    """Create with ``ray.remote(WorkerActor).options(...)`` (see ``kvgate.cluster.worker_pool``).
    Every method is a coroutine: the actor's event loop serves the worker's gRPC server."""

    def __init__(self, spec: ActorSpec) -> None:
        self._spec = spec
        self._lock = asyncio.Lock()
        self._server: WorkerServer | None = None
        self._index: RedisPrefixIndex | None = None
        self._watchdog: asyncio.Task[None] | None = None

    async def start(self) -> WorkerInfo:
        """Starts this incarnation's worker unless it runs already; returns its registration record.
        Idempotent and safe to call concurrently. Loading errors propagate (the actor stays up, so the
        caller may retry)."""
        async with self._lock:
            if self._server is None or self._server.info is None:
                await self._start()
            info = await self.info()
            assert info is not None
            return info

    async def info(self) -> WorkerInfo | None:
        """This incarnation's registration record; None before :meth:`start`."""
        return self._server.info if self._server is not None else None

    async def stop(self) -> None:
        """Stops the worker (deregisters, lets running calls finish) and closes the index. Idempotent;
        the actor process stays until the owner kills it."""
        if self._watchdog is not None:
            self._watchdog.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._watchdog
        if self._server is not None:
            await self._server.stop()
        if self._index is not None:
            await self._index.close()
            self._index = None

    async def _start(self) -> None:
        config = self._incarnation()
        self._index = await self._open_index()
        server = WorkerServer(self._index, clock=SystemClock())
        try:
            await server.start(config)
        except BaseException:
            await server.stop()
            raise
        self._server = server
        self._watchdog = asyncio.create_task(self._watch(server), name="kvgate-worker-watchdog")

    def _incarnation(self) -> WorkerConfig:
        """The spec's config for this process: fresh epoch, the node's IP, its CPUs."""
        base = self._spec.config
        host = ray.util.get_node_ip_address()
        threads = base.torch_threads or assigned_cpus()
        node = ray.get_runtime_context().get_node_id()
        return replace(base, epoch=fresh_epoch(), host=host, advertise_host=host, node_id=node,
                       torch_threads=threads)  # fmt: skip

    async def _open_index(self) -> RedisPrefixIndex | None:
        if self._spec.redis_url is None:
            return None
        # the publisher registers once Redis answers (a single server: see open_shared_index)
        return await open_shared_index(self._spec.redis_url, self._spec.index, SystemClock())

    async def _watch(self, server: WorkerServer) -> None:
        """Exits the process once this incarnation is over, so that Ray restarts it."""
        broken = asyncio.ensure_future(server.wait_broken())
        try:
            while not broken.done():
                if server.publisher is not None and server.publisher.superseded:
                    break
                await asyncio.wait([broken], timeout=WATCH_PERIOD_S)
        finally:
            broken.cancel()
        log.error("worker %s is over (engine broken or superseded): exiting for a restart", server.info)
        await server.stop()
        os._exit(EXIT_CODE_BROKEN)
