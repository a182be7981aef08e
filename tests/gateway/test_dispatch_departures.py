"""Dispatch when workers leave: a stalled worker that leaves the directory is abandoned (re-routed
before the first token, an error after), a streaming one never is; departed channels close;
quarantine is a last resort and survives a purge-and-return of the same incarnation."""

from __future__ import annotations

import asyncio

import pytest

from kvgate.gateway.upstream.dispatch import Dispatcher
from kvgate.gateway.upstream.errors import (
    WorkerFailedError,
)
from kvgate.gateway.upstream.inflight import InFlight
from kvgate.gateway.upstream.job import Job
from kvgate.proto.workers import WorkerLoad
from tests.gateway.dispatch_cluster import Cluster, collect, job
from tests.support.scripted_worker import Mode, ScriptedWorker


async def _stalled_worker(cluster: Cluster, j: Job) -> ScriptedWorker:
    """The worker ``j`` was sent to (waits until one received it)."""
    for _ in range(200):
        receivers = [w for w in cluster.workers if j.request_id in w.received]
        if receivers:
            return receivers[0]
        await asyncio.sleep(0.01)
    raise AssertionError("no worker received the request")


async def _lose(cluster: Cluster, worker: ScriptedWorker, dispatcher: Dispatcher) -> None:
    """``worker`` drops out of the index (as when its heartbeat lapses), then a directory refresh."""
    await cluster.index.deregister(worker.worker_id, worker.epoch)
    await cluster.directory.refresh()
    await dispatcher.reconcile()


def _abandoning(cluster: Cluster, grace_s: float = 0.0) -> Dispatcher:
    """A dispatcher over the cluster that abandons silent calls after ``grace_s``."""
    return Dispatcher(cluster.directory, cluster.router, cluster.channels, cluster.index,
                      inflight=InFlight(grace_s=grace_s))  # fmt: skip


async def test_a_stalled_worker_that_leaves_the_directory_is_abandoned_and_the_request_rerouted(
    cluster: Cluster,
) -> None:
    dispatcher = _abandoning(cluster)
    for worker in cluster.workers:
        worker.mode = Mode.STALL
    j = job(seed=20)
    task = asyncio.create_task(collect(dispatcher, j))
    stalled = await _stalled_worker(cluster, j)
    for worker in cluster.workers:
        if worker is not stalled:
            worker.mode = Mode.SERVE
    await _lose(cluster, stalled, dispatcher)
    tokens, done = await asyncio.wait_for(task, 5)
    assert len(tokens) == 4
    assert done.attempts == 2
    assert done.routed.decision.worker_id != stalled.worker_id
    assert stalled.worker_id not in {w.info.worker_id for w in cluster.directory.live()}


async def test_a_worker_that_stalls_mid_stream_and_leaves_ends_the_stream_with_an_error(
    cluster: Cluster,
) -> None:
    dispatcher = _abandoning(cluster)
    for worker in cluster.workers:
        worker.mode = Mode.STALL_AFTER_TWO
    j = job(seed=21, max_tokens=10)
    got: list[int] = []

    async def consume() -> None:
        async for item in dispatcher.stream(j):
            got.extend(item.token_ids)

    task = asyncio.create_task(consume())
    for _ in range(500):
        if len(got) >= 2:
            break
        await asyncio.sleep(0.01)
    await _lose(cluster, await _stalled_worker(cluster, j), dispatcher)
    with pytest.raises(WorkerFailedError, match="stopped responding mid-stream"):
        await asyncio.wait_for(task, 5)
    assert len(got) == 2


async def test_a_call_that_keeps_streaming_is_not_abandoned_when_its_worker_leaves(cluster: Cluster) -> None:
    dispatcher = _abandoning(cluster, grace_s=1.0)
    for worker in cluster.workers:
        worker.token_delay_s = 0.05
    j = job(seed=22, max_tokens=30)
    task = asyncio.create_task(collect(dispatcher, j))
    streaming = await _stalled_worker(cluster, j)
    await asyncio.sleep(0.2)
    await _lose(cluster, streaming, dispatcher)  # its tokens keep coming: alive, whatever the index says
    tokens, done = await asyncio.wait_for(task, 10)
    assert len(tokens) == 30
    assert done.attempts == 1


async def test_channels_of_departed_workers_are_closed(cluster: Cluster) -> None:
    await collect(cluster.dispatcher, job(seed=23))
    await collect(cluster.dispatcher, job(seed=24))
    used = len(cluster.channels)
    assert used >= 1
    for worker in cluster.workers:
        await cluster.index.deregister(worker.worker_id, worker.epoch)
    await cluster.directory.refresh()
    await cluster.dispatcher.reconcile()
    assert len(cluster.channels) == 0


async def test_a_quarantined_worker_is_the_last_resort_rather_than_a_refusal(cluster: Cluster) -> None:
    for worker in cluster.workers:
        cluster.directory.quarantine(worker.worker_id, 60)
    assert cluster.directory.live() == []
    tokens, done = await collect(cluster.dispatcher, job(seed=25))
    assert len(tokens) == 4
    assert done.attempts == 1


async def test_a_worker_that_leaves_and_returns_is_no_longer_quarantined(cluster: Cluster) -> None:
    worker = cluster.workers[0]
    cluster.directory.quarantine(worker.worker_id, 60)
    await cluster.index.deregister(worker.worker_id, worker.epoch)
    await cluster.directory.refresh()
    worker.epoch += 1  # it comes back (restarted or reconnected)
    await cluster.index.register(worker.info, WorkerLoad(gpu_blocks_total=100, gpu_blocks_free=100))
    await cluster.directory.refresh()
    assert worker.worker_id in {w.info.worker_id for w in cluster.directory.live()}


async def test_a_failed_worker_stays_quarantined_when_it_reappears_under_the_same_epoch(
    cluster: Cluster,
) -> None:
    """Purged after a failure, back at its next heartbeat: still the same incarnation, still out."""
    worker = cluster.workers[0]
    cluster.directory.quarantine(worker.worker_id, 60)
    await cluster.index.purge(worker.worker_id)
    await cluster.directory.refresh()
    await cluster.index.heartbeat(worker.worker_id, worker.epoch, WorkerLoad(gpu_blocks_total=100))
    await cluster.directory.refresh()
    assert worker.worker_id in {w.info.worker_id for w in cluster.directory.known()}
    assert worker.worker_id not in {w.info.worker_id for w in cluster.directory.live()}
