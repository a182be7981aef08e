"""The gateway's embedded-mode feed against real workers: it registers each worker from Stats, keeps it
live from Stats polls, mirrors its events into the memory index, purges it when it goes away, and
follows its next incarnation."""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import AsyncIterator

import pytest

from kvgate.common.clock import ManualClock, SystemClock
from kvgate.index import IndexSettings, MemoryPrefixIndex
from kvgate.index.event_feed import EventFeed
from kvgate.proto.ids import Tier, WorkerId
from kvgate.workers.service import WorkerServer
from tests.support.real_workers import StartWorker
from tests.workers.model.conftest import one_torch_thread  # noqa: F401 -- autouse: a real engine runs here
from tests.workers.service.helpers import (
    CACHE,
    client,
    engine_loop,
    eventually,
    generate_request,
    greedy,
    hashes_of,
    prompt,
    read_generation,
    stalled,
)

W = WorkerId("worker-0")


@pytest.fixture
def index() -> MemoryPrefixIndex:
    return MemoryPrefixIndex(IndexSettings(heartbeat_ttl_s=5.0), SystemClock())


@pytest.fixture
async def feed(index: MemoryPrefixIndex) -> AsyncIterator[EventFeed]:
    feed = EventFeed(index, poll_s=0.1, retry_s=(0.05, 0.2), secret=CACHE.secret)
    yield feed
    await feed.close()


async def test_the_feed_mirrors_a_worker_and_follows_its_restart(
    start_worker: StartWorker, index: MemoryPrefixIndex, feed: EventFeed
) -> None:
    ids = prompt(300)
    first = await start_worker(epoch=1)
    address = first.info.address
    feed.follow(address)
    [status] = await eventually(index.workers)
    assert status.info == first.info

    async def heartbeat_moved() -> bool:
        [now] = await index.workers()
        return now.heartbeat_at_ms > status.heartbeat_at_ms

    await eventually(heartbeat_moved)  # from the Stats polls
    async with client(address) as stub:
        await read_generation(stub.Generate(generate_request(ids, "r")))
    await eventually(lambda: _holds(index, ids))

    await first.stop()  # its event stream ends: the incarnation is over
    await eventually(lambda: _gone(index, ids))

    port = int(address.rsplit(":", 1)[1])
    second = await start_worker(epoch=2, port=port)  # restarted in place, nothing cached
    [status] = await eventually(index.workers)
    assert status.info.epoch == 2
    # Registration comes from a Stats poll, the holdings from the event stream's first snapshot:
    # the two race, and the feed is synced once that snapshot is applied.
    await eventually(lambda: feed.states[address].synced)
    async with client(address) as stub:
        again = await read_generation(stub.Generate(generate_request(ids, "r")))
    assert again.usage.cached_tokens == 0
    await eventually(lambda: _holds(index, ids))
    assert second.info == status.info

    await feed.unfollow(address)  # gone for good
    assert await index.workers() == []
    assert feed.addresses == []


async def _holds(index: MemoryPrefixIndex, ids: list[int]) -> bool:
    return (await index.lookup(hashes_of(ids))).chunks_for(W) == 2


async def _gone(index: MemoryPrefixIndex, ids: list[int]) -> bool:
    return await index.workers() == [] and (await index.lookup(hashes_of(ids))).matches == {}


async def test_a_worker_restarted_elsewhere_keeps_its_entry_while_the_old_address_fails(
    start_worker: StartWorker, index: MemoryPrefixIndex, feed: EventFeed
) -> None:
    ids = prompt(300)
    old = await start_worker(epoch=1)
    feed.follow(old.info.address)
    await eventually(index.workers)
    await old.stop()  # the old address stays followed until the cluster layer says otherwise

    new = await start_worker(epoch=2)  # same slot, a new port (as a restarted Ray actor gets)
    feed.follow(new.info.address)
    async with client(new.info.address) as stub:
        await read_generation(stub.Generate(generate_request(ids, "r")))
    await eventually(lambda: _holds(index, ids))
    retries = feed.states[old.info.address].sessions
    await eventually(lambda: feed.states[old.info.address].sessions >= retries + 3)  # still failing
    assert await _holds(index, ids)
    assert [s.info for s in await index.workers()] == [new.info]
    await feed.unfollow(old.info.address)
    assert [s.info for s in await index.workers()] == [new.info]


async def test_load_changes_reach_the_feed_without_waiting_for_a_poll(
    start_worker: StartWorker, index: MemoryPrefixIndex
) -> None:
    """The worker pushes its load on the event stream when it changes (up to 10 Hz): a gateway sees a
    queue forming in well under its Stats period (here a minute, so only the push can tell it)."""
    worker = await start_worker()
    feed = EventFeed(index, poll_s=60.0, retry_s=(0.05, 0.2), secret=CACHE.secret)
    try:
        feed.follow(worker.info.address)
        await eventually(lambda: feed.states[worker.info.address].synced)
        [before] = await index.workers()
        assert before.load.running_seqs == 0
        async with client(worker.info.address) as stub:
            long = dataclasses.replace(greedy(400), ignore_eos=True)
            call = stub.Generate(generate_request(prompt(100), "long", long))
            await eventually(lambda: _running(index), timeout_s=5.0)  # not 60 s
            call.cancel()
    finally:
        await feed.close()


async def _running(index: MemoryPrefixIndex) -> bool:
    [status] = await index.workers()
    return status.load.running_seqs == 1


async def test_a_request_admitted_by_the_worker_is_pending_there_with_its_load_before_any_step(
    start_worker: StartWorker, index: MemoryPrefixIndex
) -> None:
    """Admissions: a request sent to the worker by anyone (here: straight to it, as another gateway
    would) shows up in this feed's index while the engine has not run a step since: the prompt's
    chunks pending at the worker, its queue counting the request, and still counting it in the
    worker's later reports (Stats polls) until a step does. The held chunks follow the prefill."""
    worker = await start_worker()
    feed = EventFeed(index, poll_s=0.05, retry_s=(0.05, 0.2), secret=CACHE.secret)
    ids = prompt(300)  # two full chunks
    try:
        async with _admitted_while_stalled(worker, feed, index, ids):
            [admitted] = await index.workers()
            assert (admitted.load.waiting_seqs, admitted.load.waiting_prefill_tokens) == (1, 300)
            [later] = await eventually(lambda: _reported_after(index, admitted.heartbeat_at_ms))
            assert later.load == admitted.load
        await eventually(lambda: _tiers(index, ids, Tier.GPU.value * 2))
    finally:
        await feed.close()


async def test_an_admission_keeps_its_chunks_pending_while_the_queue_it_reports_is_computed(
    start_worker: StartWorker,
) -> None:
    """The admission reports 300 prefill tokens waiting (the request's own); at the 100 tokens/s
    this feed assumes that is 3 s, so the chunks stay pending for ``pending_ttl_s`` + 3 s on the
    index's clock, not ``pending_ttl_s`` alone: other gateways follow the run while it waits."""
    clock = ManualClock()
    index = MemoryPrefixIndex(IndexSettings(heartbeat_ttl_s=60.0), clock)
    worker = await start_worker()
    feed = EventFeed(index, poll_s=0.05, retry_s=(0.05, 0.2), secret=CACHE.secret, prefill_tokens_per_s=100.0)
    ids = prompt(300)  # two full chunks
    try:
        async with _admitted_while_stalled(worker, feed, index, ids):
            clock.advance(IndexSettings().pending_ttl_s + 2.5)
            assert await _tiers(index, ids, Tier.PENDING.value * 2)
            clock.advance(1.0)
            assert (await index.lookup(hashes_of(ids))).match_for(W) is None
    finally:
        await feed.close()


@contextlib.asynccontextmanager
async def _admitted_while_stalled(
    worker: WorkerServer, feed: EventFeed, index: MemoryPrefixIndex, ids: list[int]
) -> AsyncIterator[None]:
    """The feed follows ``worker`` (synced); a request for ``ids`` sent straight to the worker, as
    another gateway would, is admitted while its engine runs no step: the block runs once the
    request's chunks are pending in ``index``; afterwards the engine runs again and the generation
    is read to its end."""
    feed.follow(worker.info.address)
    await eventually(lambda: feed.states[worker.info.address].synced)
    async with client(worker.info.address) as stub:
        async with stalled(engine_loop(worker)):
            call = stub.Generate(generate_request(ids, "r"))
            await eventually(lambda: _tiers(index, ids, Tier.PENDING.value * 2))
            yield
        await read_generation(call)


async def _tiers(index: MemoryPrefixIndex, ids: list[int], tiers: str) -> bool:
    match = (await index.lookup(hashes_of(ids))).match_for(W)
    return match is not None and match.tiers == tiers


async def _reported_after(index: MemoryPrefixIndex, at_ms: int) -> list | None:
    statuses = await index.workers()
    return statuses if statuses[0].heartbeat_at_ms > at_ms else None
