"""Sends the router's warm-ups: background prefills of a hot shared opening on an idle worker.

A warm-up is fire-and-forget: the request that caused it does not wait for it, and its outcome only
counts in the gateway's metrics (``kvgate_warm_ups_total{outcome}``). At most ``max_in_flight`` run
at once; beyond that a warm-up is dropped (the next request through the opening may ask again).
"""

from __future__ import annotations

import asyncio
import logging

import grpc

from kvgate.gateway.metrics import GatewayMetrics
from kvgate.gateway.routing.types import WarmUp
from kvgate.gateway.upstream import calls
from kvgate.gateway.upstream.channels import ChannelPool
from kvgate.gateway.upstream.errors import UpstreamError
from kvgate.gateway.upstream.job import Job
from kvgate.proto import worker_pb2
from kvgate.proto.workers import WorkerInfo

log = logging.getLogger(__name__)

WARM_UP_TIMEOUT_S = 60.0  # a warm-up a worker has not run by then is not wanted any more


class WarmUpSender:
    """Owned by the dispatcher; :meth:`close` cancels the warm-ups in flight (at shutdown)."""

    def __init__(
        self, channels: ChannelPool, metrics: GatewayMetrics | None, max_in_flight: int = 16
    ) -> None:
        if max_in_flight < 1:
            raise ValueError("max_in_flight must be >= 1")
        self._channels = channels
        self._metrics = metrics
        self._max = max_in_flight
        self._tasks: set[asyncio.Task[None]] = set()

    def send(self, job: Job, warm: WarmUp, info: WorkerInfo) -> None:
        """Starts ``warm`` (a copy of ``job``'s opening) on the worker ``info``; returns at once."""
        if len(self._tasks) >= self._max:
            self._count("dropped")
            return
        task = asyncio.create_task(self._run(calls.warm_request(job, warm), info), name="kvgate-warm-up")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def drain(self) -> None:
        """Waits for the warm-ups in flight to end (in tests)."""
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def close(self) -> None:
        """Cancels the warm-ups in flight and waits for them to end."""
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _run(self, request: worker_pb2.GenerateRequest, info: WorkerInfo) -> None:
        try:
            call = self._channels.stub(info).Generate(request, timeout=WARM_UP_TIMEOUT_S)
            async for _ in call:
                pass
        except (grpc.aio.AioRpcError, UpstreamError) as exc:  # UpstreamError: the pool closed
            log.debug("warm-up on worker %s failed: %s", info.worker_id, exc)
            self._count("failed")
            return
        self._count("done")

    def _count(self, outcome: str) -> None:
        if self._metrics is not None:
            self._metrics.warm_up(outcome)
