"""Dispatch through real gRPC to scripted workers on loopback: streaming, cached tokens, failover,
mid-stream failure, client disconnect, deadlines, busy and invalid requests."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass

import numpy as np
import pytest

from kvgate.clock import SystemClock
from kvgate.gateway.routing import RouteReason, get_policy
from kvgate.gateway.routing.router import Router
from kvgate.gateway.upstream.channels import ChannelPool
from kvgate.gateway.upstream.directory import WorkerDirectory
from kvgate.gateway.upstream.dispatch import Dispatcher
from kvgate.gateway.upstream.errors import (
    DeadlineError,
    InvalidRequestError,
    WorkerFailedError,
    WorkersBusyError,
)
from kvgate.gateway.upstream.inflight import InFlight
from kvgate.gateway.upstream.job import Done, Job, Tokens
from kvgate.index import IndexSettings, MemoryPrefixIndex
from kvgate.proto.fingerprint import CacheConfig
from kvgate.proto.hashing import chunk_hashes
from kvgate.proto.ids import WorkerId
from kvgate.proto.sampling import FinishReason, SamplingParams
from kvgate.proto.workers import WorkerLoad
from tests.support.scripted_worker import Mode, ScriptedWorker

CONFIG = CacheConfig("test-model")


@dataclass
class Cluster:
    workers: list[ScriptedWorker]
    dispatcher: Dispatcher
    directory: WorkerDirectory
    index: MemoryPrefixIndex
    channels: ChannelPool
    router: Router

    def worker(self, worker_id: str) -> ScriptedWorker:
        return next(w for w in self.workers if w.worker_id == worker_id)


@pytest.fixture
async def cluster() -> AsyncIterator[Cluster]:
    index = MemoryPrefixIndex(IndexSettings(), SystemClock())
    workers = [await ScriptedWorker(WorkerId(f"w{i}"), CONFIG, index).start() for i in range(3)]
    directory = WorkerDirectory(index, CONFIG.fingerprint())
    await directory.refresh()
    router = Router(
        index, get_policy("kvgate"), get_policy("least_loaded"), CONFIG.chunk_size, 2.0, SystemClock()
    )
    channels = ChannelPool()
    yield Cluster(workers, Dispatcher(directory, router, channels, index), directory, index, channels, router)
    await channels.close()
    for worker in workers:
        await worker.stop()


def job(tokens: int = 1000, seed: int = 0, max_tokens: int = 4, deadline_s: float | None = None) -> Job:
    ids = np.random.default_rng(seed).integers(0, 900, tokens).astype(np.uint32)
    hashes = chunk_hashes(ids, CONFIG.root().digest(), CONFIG.chunk_size)
    deadline = time.monotonic() + deadline_s if deadline_s else None
    return Job(
        uuid.uuid4().hex,
        ids,
        hashes,
        SamplingParams(max_tokens=max_tokens),
        request_key=seed,
        deadline_s=deadline,
    )


async def collect(dispatcher: Dispatcher, j: Job) -> tuple[list[int], Done]:
    tokens: list[int] = []
    async for item in dispatcher.stream(j):
        if isinstance(item, Tokens):
            tokens.extend(item.token_ids)
        else:
            return tokens, item
    raise AssertionError("no Done")


async def test_streams_tokens_then_usage_and_a_repeat_is_a_cache_hit(cluster: Cluster) -> None:
    first_tokens, first = await collect(cluster.dispatcher, job(seed=1))
    assert len(first_tokens) == 4
    assert first.finish_reason is FinishReason.LENGTH
    assert first.usage.cached_tokens == 0

    _, second = await collect(cluster.dispatcher, job(seed=1))
    assert second.routed.decision.worker_id == first.routed.decision.worker_id
    assert second.routed.decision.reason is RouteReason.CACHE_HIT
    assert second.routed.decision.predicted_cached_tokens == 7 * 128  # 1000 tokens: 7 full chunks
    assert second.usage.cached_tokens == 7 * 128  # the worker's own count agrees


async def test_a_worker_failing_before_the_first_token_is_avoided(cluster: Cluster) -> None:
    _, warm = await collect(cluster.dispatcher, job(seed=2))
    broken = cluster.worker(warm.routed.decision.worker_id)
    broken.mode = Mode.FAIL_BEFORE_FIRST

    tokens, done = await collect(cluster.dispatcher, job(seed=2))  # cached on the broken one

    assert len(tokens) == 4
    assert done.attempts == 2
    assert done.routed.decision.worker_id != broken.worker_id
    assert broken.worker_id not in {w.info.worker_id for w in cluster.directory.live()}
    assert (await cluster.index.lookup(job(seed=2).hashes)).chunks_for(broken.worker_id) == 0  # purged


async def test_a_worker_failing_mid_stream_ends_the_stream_with_an_error(cluster: Cluster) -> None:
    for worker in cluster.workers:
        worker.mode = Mode.FAIL_AFTER_TWO
    received: list[int] = []

    async def read_all() -> None:
        async for item in cluster.dispatcher.stream(job(seed=3)):
            received.extend(item.token_ids)

    with pytest.raises(WorkerFailedError, match="mid-stream"):
        await read_all()
    assert len(received) == 2


async def test_a_client_that_stops_reading_cancels_the_work_on_the_worker(cluster: Cluster) -> None:
    for worker in cluster.workers:
        worker.token_delay_s = 0.05
    j = job(seed=4, max_tokens=100)
    stream = cluster.dispatcher.stream(j)
    await anext(stream)
    await stream.aclose()  # the HTTP client went away

    for _ in range(100):
        if any(j.request_id in w.cancelled for w in cluster.workers):
            break
        await asyncio.sleep(0.02)
    assert any(j.request_id in w.cancelled for w in cluster.workers)
    assert not any(j.request_id in w.served for w in cluster.workers)


async def test_a_stalled_worker_hits_the_deadline_instead_of_hanging(cluster: Cluster) -> None:
    for worker in cluster.workers:
        worker.mode = Mode.STALL
    start = time.monotonic()
    with pytest.raises(DeadlineError):
        await collect(cluster.dispatcher, job(seed=5, deadline_s=0.5))
    assert time.monotonic() - start < 3


async def test_every_worker_busy_is_reported_as_busy(cluster: Cluster) -> None:
    for worker in cluster.workers:
        worker.mode = Mode.BUSY
    with pytest.raises(WorkersBusyError) as err:
        await collect(cluster.dispatcher, job(seed=6))
    assert err.value.retry_after_s
    assert len(cluster.directory.live()) == 3  # busy is not broken: nobody quarantined


async def test_an_invalid_request_is_not_retried(cluster: Cluster) -> None:
    for worker in cluster.workers:
        worker.mode = Mode.REJECT
    with pytest.raises(InvalidRequestError, match="prompt too long"):
        await collect(cluster.dispatcher, job(seed=7))
    assert len(cluster.directory.live()) == 3  # nobody quarantined for a client error


async def test_a_worker_with_another_fingerprint_is_refused(cluster: Cluster) -> None:
    stranger = await ScriptedWorker(
        WorkerId("w9"), CacheConfig("test-model", chunk_size=256), cluster.index
    ).start()
    await cluster.directory.refresh()
    assert "w9" not in {w.info.worker_id for w in cluster.directory.live()}
    assert "w9" in cluster.directory.rejected
    await stranger.stop()


async def test_a_deadline_already_past_fails_without_leaking_in_flight_work(cluster: Cluster) -> None:
    late = job(seed=8)
    late = Job(
        late.request_id,
        late.token_ids,
        late.hashes,
        late.sampling,
        late.request_key,
        deadline_s=time.monotonic() - 1,
    )
    with pytest.raises(DeadlineError):
        await collect(cluster.dispatcher, late)
    assert all(cluster.router.inflight_tokens(w.worker_id) == 0 for w in cluster.workers)


async def test_finished_requests_leave_no_in_flight_work(cluster: Cluster) -> None:
    for seed in range(5):
        await collect(cluster.dispatcher, job(seed=20 + seed))
    assert all(cluster.router.inflight_tokens(w.worker_id) == 0 for w in cluster.workers)


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
