"""The router with a real index: bursts stay together, unrelated load spreads, a dead index falls
back to load, and in-flight work is accounted until prefill is done."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import uuid
from collections import Counter
from collections.abc import AsyncIterator

import numpy as np
import pytest

from kvgate.common.clock import Clock, SystemClock
from kvgate.gateway.routing import RouteReason, get_policy
from kvgate.gateway.routing.home import home_worker
from kvgate.gateway.routing.router import Router
from kvgate.index import IndexSettings, MemoryPrefixIndex, PrefixIndex, RedisPrefixIndex, redis_client
from kvgate.proto.hashing import HashRoot, chunk_hashes
from kvgate.proto.ids import WorkerId
from kvgate.proto.layout import DEFAULT_CHUNK_SIZE as CHUNK
from tests.index.conftest import drop_namespace
from tests.index.helpers import LOAD, info
from tests.support.redis_server import free_port

ROOT = HashRoot(b"", "m").digest()
WORKERS = [WorkerId(f"worker-{i}") for i in range(4)]


@contextlib.asynccontextmanager
async def routing_index(request: pytest.FixtureRequest, clock: Clock) -> AsyncIterator[PrefixIndex]:
    """The ``request.param`` backend ("memory" or "redis") on ``clock`` (Redis keeps its own time
    only for the system clock), with ``WORKERS`` registered; closed, and its keys dropped, after."""
    settings = IndexSettings(namespace=f"kvgate-test-{uuid.uuid4().hex[:12]}", timeout_s=2)
    if request.param == "memory":
        idx: PrefixIndex = MemoryPrefixIndex(settings, clock)
    else:
        url = request.getfixturevalue("redis_url")
        server_time = isinstance(clock, SystemClock)
        idx = RedisPrefixIndex(redis_client(url, settings), settings, clock, server_time=server_time)
    for worker in WORKERS:
        await idx.register(info(worker), LOAD.__class__())
    yield idx
    await idx.close()
    if request.param == "redis":
        await drop_namespace(request.getfixturevalue("redis_url"), settings.namespace)


@pytest.fixture(params=["memory", pytest.param("redis", marks=pytest.mark.redis)])
async def index(request: pytest.FixtureRequest) -> AsyncIterator[PrefixIndex]:
    async with routing_index(request, SystemClock()) as idx:
        yield idx


def prompt(seed: int, tokens: int) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 50_000, tokens).astype(np.uint32)


def router_for(index: PrefixIndex) -> Router:
    return Router(index, get_policy("kvgate"), get_policy("least_loaded"), CHUNK, 2, SystemClock())


async def test_a_burst_of_one_new_prefix_lands_on_one_worker_while_other_load_spreads(
    index: PrefixIndex,
) -> None:
    router = router_for(index)
    workers = await index.workers()
    await asyncio.gather(*(index.workers() for _ in range(40)))  # warm connections: real concurrency
    shared = prompt(0, 4096 + 50)  # 32 full chunks, then a 50-token tail
    burst = [(chunk_hashes(shared, ROOT, CHUNK), len(shared)) for _ in range(20)]
    others = [(chunk_hashes(p, ROOT, CHUNK), len(p)) for p in (prompt(s, 4096) for s in range(1, 7))]
    jobs = [*burst[:10], *others[:3], *burst[10:], *others[3:]]  # interleaved, all at once

    routed = await asyncio.gather(
        *(router.route(h, n, workers, request_key=i) for i, (h, n) in enumerate(jobs))
    )

    burst_workers = Counter(r.decision.worker_id for r, job in zip(routed, jobs, strict=True) if job in burst)
    assert len(burst_workers) == 1, burst_workers
    decisions = [r.decision for r, job in zip(routed, jobs, strict=True) if job in burst]
    leaders = [d for d in decisions if d.reason is not RouteReason.CACHE_HIT]
    assert len(leaders) == 1  # whichever decided first; the 19 others follow it
    assert leaders[0].reason is RouteReason.NEW_PREFIX  # and the label says why each went there
    assert all(d.predicted_cached_tokens == 4096 for d in decisions if d is not leaders[0])
    other_workers = {r.decision.worker_id for r, job in zip(routed, jobs, strict=True) if job in others}
    assert len(other_workers) >= 3  # spread by queue, not piled onto the burst's worker


async def test_inflight_tokens_are_counted_until_prefill_is_done(index: PrefixIndex) -> None:
    router = router_for(index)
    workers = await index.workers()
    first = await router.route(chunk_hashes(prompt(1, 2048), ROOT, CHUNK), 2048, workers, request_key=0)
    busy = first.decision.worker_id
    assert router.inflight_tokens(busy) == 2048

    second = await router.route(chunk_hashes(prompt(2, 2048), ROOT, CHUNK), 2048, workers, request_key=0)
    assert second.decision.worker_id != busy  # the first one's prefill is still queued there

    router.prefill_done(first)
    router.prefill_done(first)  # idempotent
    assert router.inflight_tokens(busy) == 0


@pytest.fixture
async def down() -> AsyncIterator[PrefixIndex]:
    """A Redis index whose server does not exist: every lookup fails (fast) as unavailable."""
    settings = IndexSettings(timeout_s=0.05)
    client = redis_client(f"redis://127.0.0.1:{free_port()}/0", settings)
    idx = RedisPrefixIndex(client, settings, SystemClock())
    yield idx
    await idx.close()


async def test_an_unavailable_index_falls_back_to_load(index: PrefixIndex, down: PrefixIndex) -> None:
    workers = await index.workers()
    router = Router(down, get_policy("kvgate"), get_policy("least_loaded"), CHUNK, 2, SystemClock())
    hashes = chunk_hashes(prompt(0, 1024), ROOT, CHUNK)
    routed = [await router.route(hashes, 1024, workers, i) for i in range(4)]
    assert all(r.degraded and r.decision.reason is RouteReason.FALLBACK for r in routed)
    assert all(r.decision.predicted_cached_tokens == 0 for r in routed)
    assert len({r.decision.worker_id for r in routed}) == 4  # least loaded, counting in-flight work


async def test_an_unavailable_index_keeps_a_prompt_cache_key_on_its_home_unless_it_is_hot(
    index: PrefixIndex, down: PrefixIndex
) -> None:
    workers = await index.workers()
    router = Router(down, get_policy("kvgate"), get_policy("least_loaded"), CHUNK, 2, SystemClock())
    hashes = chunk_hashes(prompt(0, 1024), ROOT, CHUNK)
    home = home_worker("conversation-7", [w.info.worker_id for w in workers])
    routed = [await router.route(hashes, 1024, workers, i, cache_key="conversation-7") for i in range(4)]
    assert [r.decision.worker_id for r in routed] == [home] * 4  # load alone would spread them
    assert all(r.degraded and r.decision.reason is RouteReason.FALLBACK for r in routed)
    # the home has 20 s of queued prefill, far above the others': the key yields to load
    hot = [dataclasses.replace(w, load=dataclasses.replace(w.load, waiting_prefill_tokens=200_000))
           if w.info.worker_id == home else w for w in workers]  # fmt: skip
    moved = await router.route(hashes, 1024, hot, 9, cache_key="conversation-7")
    assert moved.decision.worker_id != home
    assert moved.decision.reason is RouteReason.FALLBACK


async def test_a_prompt_queued_behind_a_long_wait_stays_pending_for_the_next_request() -> None:
    """Both workers have 5 s of queued prefill: the first request's chunks are pending on its
    worker until well after the 2 s pending TTL, so a request sharing them 4 s later follows it
    instead of computing them again on the other worker."""
    from kvgate.common.clock import ManualClock
    from kvgate.proto.workers import WorkerLoad

    clock = ManualClock()
    index = MemoryPrefixIndex(IndexSettings(), clock)
    busy = WorkerLoad(waiting_prefill_tokens=50_000, gpu_blocks_total=10_000, gpu_blocks_free=10_000)
    for worker in WORKERS[:2]:
        await index.register(info(worker), busy)
    router = Router(index, get_policy("kvgate"), get_policy("least_loaded"), CHUNK, 2, clock)
    document = prompt(7, 64 * CHUNK)
    first = await router.route(chunk_hashes(document, ROOT, CHUNK), len(document), await index.workers(), 1)
    clock.advance(4)
    for worker in WORKERS[:2]:
        await index.heartbeat(worker, info(worker).epoch, busy)
    follow = np.concatenate([document, prompt(8, 2 * CHUNK)])
    hashes = chain_of(follow)
    for key in range(2, 10):
        routed = await router.preview(hashes, len(follow), await index.workers(), key)
        assert routed.decision.worker_id == first.decision.worker_id
        assert routed.decision.predicted_cached_tokens == 64 * CHUNK


def chain_of(tokens: np.ndarray) -> list:
    return chunk_hashes(tokens, ROOT, CHUNK)


async def test_pending_hints_cover_only_the_chunks_the_chosen_worker_will_compute() -> None:
    """Each hint is a write to the shared index (a Redis call): the chunks the worker already holds
    are not written again, only the run it is about to compute."""
    from kvgate.common.clock import ManualClock
    from kvgate.proto.events import EventBatch, KVEvent
    from kvgate.proto.ids import SeqNo, Tier

    class Recording(MemoryPrefixIndex):
        def __init__(self, *args: object) -> None:
            super().__init__(*args)  # type: ignore[arg-type]
            self.hinted: list[int] = []

        async def add_pending(self, hashes, worker_id, wait_s=0.0):  # type: ignore[no-untyped-def]
            self.hinted.append(len(hashes))
            await super().add_pending(hashes, worker_id, wait_s)

    clock = ManualClock()
    index = Recording(IndexSettings(), clock)
    await index.register(info(WORKERS[0]), LOAD.__class__())
    hashes = chunk_hashes(prompt(3, 8 * CHUNK), ROOT, CHUNK)
    held = tuple(KVEvent.stored(h, Tier.GPU, clock.now_ms() + 60_000) for h in hashes[:5])
    assert (await index.apply(EventBatch(WORKERS[0], info(WORKERS[0]).epoch, SeqNo(1), held))).ok
    router = Router(index, get_policy("kvgate"), get_policy("least_loaded"), CHUNK, 2, clock)
    routed = await router.route(hashes, 8 * CHUNK, await index.workers(), request_key=1)
    await router.drain()
    assert routed.decision.matched_chunks == 5
    assert index.hinted == [3]


async def test_a_worker_that_must_load_an_adapter_is_chosen_only_when_its_load_beats_the_queues(
    index: PrefixIndex,
) -> None:
    """Every worker but one needs 2 s to load the request's adapter: an idle cluster sends it to the
    one holding it; once that one's queue is longer than the load, another worker loads it."""
    router = router_for(index)
    workers = await index.workers()
    holder = WORKERS[2]
    startup = {w: 2.0 for w in WORKERS if w != holder}
    for i in range(3):
        hashes, n = chunk_hashes(prompt(100 + i, 512), ROOT, CHUNK), 512
        routed = await router.preview(hashes, n, workers, request_key=i, startup_s=startup)
        assert routed.decision.worker_id == holder
    others = [w for w in workers if w.info.worker_id != holder]
    queued = dataclasses.replace(workers[2], load=dataclasses.replace(LOAD, waiting_prefill_tokens=200_000))
    routed = await router.preview(
        chunk_hashes(prompt(200, 512), ROOT, CHUNK), 512, [*others, queued], 7, None, startup
    )
    assert routed.decision.worker_id != holder
    assert routed.decision.estimated_ttft_s >= 2.0  # the load counts in the estimate
