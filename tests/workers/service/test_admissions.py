"""Admissions: the worker announces each request it takes in on the event stream (to subscribers that
asked), with the chunks it will compute and its load counting the request, and every report it makes
afterwards keeps counting it until the engine's next step does."""

from __future__ import annotations

import dataclasses

from kvgate.proto.events import Admission, EventBatch, KVEvent, Snapshot
from kvgate.proto.ids import ChunkHash, Epoch, SeqNo, Tier, WorkerId
from kvgate.proto.workers import WorkerLoad
from kvgate.workers.service import EventHub
from kvgate.workers.service.admissions import AdmissionAnnouncer
from kvgate.workers.service.engine_loop import EngineLoop
from kvgate.workers.service.engine_stats import EngineStats
from tests.workers.engine.conftest import TinyPair, tiny  # noqa: F401 -- the session's tiny model
from tests.workers.engine.helpers import GREEDY, TINY_CACHE, engine_for, random_ids, request

W = WorkerId("worker-0")
C = 128


def chunk(n: int) -> ChunkHash:
    return ChunkHash(bytes([n]) * 16)


def stored(seq: int, *chunks: int) -> EventBatch:
    events = tuple(KVEvent.stored(chunk(c), Tier.GPU, 10**13) for c in chunks)
    return EventBatch(W, Epoch(1), SeqNo(seq), events)


async def test_only_subscribers_that_asked_get_admissions_in_order_with_the_batches() -> None:
    hub = EventHub(W, Epoch(1))
    plain, asked = hub.subscribe(), hub.subscribe(admissions=True)
    assert isinstance(await plain.get(), Snapshot)
    assert isinstance(await asked.get(), Snapshot)
    admission = Admission(W, Epoch(1), (chunk(9),), WorkerLoad(waiting_seqs=1))
    hub.publish([stored(1, 1)])
    hub.admit(admission)
    hub.publish([stored(2, 2)])
    assert [await asked.get() for _ in range(3)] == [stored(1, 1), admission, stored(2, 2)]
    assert [await plain.get() for _ in range(2)] == [stored(1, 1), stored(2, 2)]
    assert hub.snapshot().seq == 2
    assert {h.chunk for h in hub.snapshot().holdings} == {chunk(1), chunk(2)}


async def test_an_admission_lists_the_chunks_after_the_held_run_and_counts_the_uncached_tokens() -> None:
    hub = EventHub(W, Epoch(1))
    subscription = hub.subscribe(admissions=True)
    await subscription.get()  # the snapshot
    hub.publish([stored(1, 1, 2, 4)])  # 3 is not held: the run ends there
    await subscription.get()
    announcer = AdmissionAnnouncer(hub, W, Epoch(1), C)
    stats = EngineStats(load=WorkerLoad(waiting_seqs=2, waiting_prefill_tokens=1000, running_seqs=1))

    announcer.announce((chunk(1), chunk(2), chunk(3), chunk(4)), 4 * C + 5, stats)
    first = await subscription.get()
    assert first == Admission(W, Epoch(1), (chunk(3), chunk(4)), first.load)
    assert (first.load.waiting_seqs, first.load.waiting_prefill_tokens, first.load.running_seqs) == (
        3, 1000 + 2 * C + 5, 1,
    )  # fmt: skip

    announcer.announce((chunk(7),), 100, stats)  # before the next step: counted on top of the first
    second = await subscription.get()
    assert second.pending == (chunk(7),)
    assert (second.load.waiting_seqs, second.load.waiting_prefill_tokens) == (4, 1000 + 2 * C + 5 + 100)
    assert announcer.load(stats) == second.load  # every report keeps counting them

    after_step = EngineStats(load=WorkerLoad(waiting_seqs=4, waiting_prefill_tokens=900))
    assert announcer.load(after_step) == after_step.load  # the step's figures count them itself


async def test_a_burst_sharing_a_new_prefix_counts_it_once_while_the_first_computes_it() -> None:
    hub = EventHub(W, Epoch(1))
    subscription = hub.subscribe(admissions=True)
    await subscription.get()
    now = [0.0]
    announcer = AdmissionAnnouncer(hub, W, Epoch(1), C, ahead_s=10.0, monotonic=lambda: now[0])
    stats = EngineStats()
    prefix = (chunk(1), chunk(2), chunk(3))
    for n in range(3):
        announcer.announce((*prefix, chunk(10 + n)), 4 * C, stats)
    loads = [(await subscription.get()).load.waiting_prefill_tokens for _ in range(3)]
    assert loads == [4 * C, 4 * C + C, 4 * C + 2 * C]  # the prefix once, then each own chunk
    now[0] = 11.0  # the first requests are long done (or gone): the prefix counts again
    announcer.announce((*prefix, chunk(20)), 4 * C, stats)
    assert (await subscription.get()).load.waiting_prefill_tokens == 6 * C + 4 * C


async def test_a_warm_up_announces_its_chunks_and_adds_no_load_but_counts_as_computed_ahead() -> None:
    hub = EventHub(W, Epoch(1))
    subscription = hub.subscribe(admissions=True)
    await subscription.get()
    announcer = AdmissionAnnouncer(hub, W, Epoch(1), C, ahead_s=10.0, monotonic=lambda: 0.0)
    stats = EngineStats(load=WorkerLoad(waiting_seqs=1, waiting_prefill_tokens=500))
    prefix = (chunk(1), chunk(2), chunk(3))
    announcer.announce(prefix, 3 * C, stats, background=True)
    warm = await subscription.get()
    assert warm.pending == prefix
    assert (warm.load.waiting_seqs, warm.load.waiting_prefill_tokens) == (1, 500)
    announcer.announce((*prefix, chunk(4)), 4 * C, stats)  # the prefix comes from the warm-up
    assert (await subscription.get()).load.waiting_prefill_tokens == 500 + C


async def test_the_engine_loop_announces_each_request_and_a_failing_announcement_fails_nothing(
    tiny: TinyPair,  # noqa: F811 -- the fixture imported above
) -> None:
    """``on_admit`` gets the prompt's chunk hashes and length at ``submit``; when it raises, the request
    is still admitted and runs to its end."""
    heard: list[tuple[tuple[ChunkHash, ...], int]] = []

    def announce(chunks: tuple[ChunkHash, ...], prompt_tokens: int, stats: EngineStats, bg: bool) -> None:
        heard.append((chunks, prompt_tokens))
        assert not bg
        raise RuntimeError("a broken announcement")

    loop = EngineLoop(engine_for(tiny.ours, gpu_blocks=32), max_in_flight=4, on_admit=announce)
    loop.start()
    try:
        ids = random_ids(20, seed=1)
        stream = loop.submit(request("r", ids, dataclasses.replace(GREEDY, max_tokens=2)))
        outputs = [out async for out in stream]
        assert outputs[-1].finished
        [(chunks, tokens)] = heard
        assert tokens == 20
        assert len(chunks) == 20 // TINY_CACHE.chunk_size
    finally:
        await loop.stop()
