"""Dispatch through real gRPC to scripted workers on loopback: streaming, cached tokens, failover,
mid-stream failure, client disconnect, deadlines, busy and invalid requests."""

from __future__ import annotations

import asyncio
import time

import pytest

from kvgate.gateway.routing import RouteReason
from kvgate.gateway.upstream.errors import (
    DeadlineError,
    InvalidRequestError,
    WorkerFailedError,
    WorkersBusyError,
)
from kvgate.gateway.upstream.job import Job
from kvgate.proto.ids import WorkerId
from kvgate.proto.layout import CacheLayout
from kvgate.proto.sampling import FinishReason
from tests.gateway.dispatch_cluster import Cluster, collect, job
from tests.support.scripted_worker import Mode, ScriptedWorker


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


async def test_the_reply_tells_the_router_how_much_the_worker_reused(cluster: Cluster) -> None:
    """The router's presumptions learn from the usage each reply ends with: the tickets of the next
    two decisions are marked as presumptions (of a 256-token opening) and the replies settle them,
    the repeat's 896 reused tokens as a presumption that paid."""
    cluster.presumption.made(ticket=1, opening_tokens=256)
    cluster.presumption.made(ticket=2, opening_tokens=256)
    _, first = await collect(cluster.dispatcher, job(seed=5))
    assert (first.routed.ticket, len(cluster.presumption)) == (1, 1)
    assert cluster.presumption.trust == pytest.approx(0.5 * 0.98)  # nothing reused: it did not pay
    _, second = await collect(cluster.dispatcher, job(seed=5))
    assert (second.routed.ticket, len(cluster.presumption)) == (2, 0)
    assert cluster.presumption.trust == pytest.approx(0.49 + 0.02 * (1 - 0.49))


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
        WorkerId("w9"), CacheLayout("test-model", chunk_size=256), cluster.index
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
