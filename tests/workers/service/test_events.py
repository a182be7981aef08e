"""SubscribeEvents: a snapshot first, then every batch, so a gateway's in-memory index learns what the
worker holds; a subscriber that falls behind gets a fresh snapshot instead of an unbounded queue."""

from __future__ import annotations

import asyncio
import itertools

from kvgate.common.clock import SystemClock
from kvgate.index import IndexSettings, MemoryPrefixIndex
from kvgate.proto import convert, worker_pb2
from kvgate.proto.events import EventBatch, KVEvent, Snapshot
from kvgate.proto.ids import ChunkHash, Epoch, SeqNo, Tier, WorkerId
from kvgate.workers.service import EventHub
from tests.support.real_workers import StartWorker
from tests.workers.service.helpers import (
    client,
    eventually,
    generate_request,
    hashes_of,
    prompt,
    read_generation,
)

W = WorkerId("worker-0")


async def test_events_make_the_prompts_chunks_match_this_worker_in_a_memory_index(
    start_worker: StartWorker,
) -> None:
    ids = prompt(300)  # 2 full chunks of 128 tokens
    worker = await start_worker()
    index = MemoryPrefixIndex(IndexSettings(), SystemClock())
    async with client(worker.info.address) as stub:
        stats = await stub.Stats(worker_pb2.StatsRequest())
        info, load = convert.worker_info_from_proto(stats.info), convert.worker_load_from_proto(stats.load)
        await index.register(info, load)
        events = stub.SubscribeEvents(worker_pb2.SubscribeEventsRequest())
        stream = aiter(events)
        first = (await anext(stream)).snapshot
        assert (first.worker_id, first.epoch, first.seq, len(first.holdings)) == ("worker-0", 1, 0, 0)
        assert (await index.resync(convert.snapshot_from_proto(first))).ok

        await read_generation(stub.Generate(generate_request(ids, "r")))

        loads = []

        async def applied_until_matched() -> bool:
            msg = await anext(stream)
            if msg.HasField("load"):  # interleaved whenever the load changed
                loads.append(convert.worker_load_from_proto(msg.load))
                return False
            assert msg.HasField("batch")
            assert (await index.apply(convert.event_batch_from_proto(msg.batch))).ok
            return (await index.lookup(hashes_of(ids))).chunks_for(W) == 2

        await eventually(applied_until_matched)
        assert loads  # the load went out at the start of the stream at least
        assert all(a != b for a, b in itertools.pairwise(loads))  # only when it changed
        events.cancel()

        late = stub.SubscribeEvents(worker_pb2.SubscribeEventsRequest())
        snapshot = (await anext(aiter(late))).snapshot
        late.cancel()
        last_seq = (await stub.Stats(worker_pb2.StatsRequest())).last_event_seq
    assert set(hashes_of(ids)) <= {h.chunk for h in snapshot.holdings}  # a late subscriber starts full
    assert snapshot.seq == last_seq
    assert await eventually(lambda: worker.hub is not None and worker.hub.subscribers == 0)


def batch(seq: int, *chunks: int) -> EventBatch:
    events = tuple(KVEvent.stored(ChunkHash(bytes([c]) * 16), Tier.GPU, 10**13) for c in chunks)
    return EventBatch(W, Epoch(1), SeqNo(seq), events)


async def test_a_slow_subscriber_gets_a_snapshot_instead_of_an_unbounded_queue() -> None:
    hub = EventHub(W, Epoch(1), queue_size=2)
    slow, fast = hub.subscribe(), hub.subscribe(queue_size=100)
    assert (await slow.get()) == Snapshot(W, Epoch(1), SeqNo(0), ())
    assert isinstance(await fast.get(), Snapshot)

    hub.publish([batch(1, 1), batch(2, 2)])
    hub.publish([batch(3, 3)])  # overflows the slow one: its queue is dropped
    hub.publish([batch(4, 4)])
    caught_up = await slow.get()
    assert isinstance(caught_up, Snapshot)
    assert caught_up.seq == 4
    assert {h.chunk[0] for h in caught_up.holdings} == {1, 2, 3, 4}
    hub.publish([batch(5, 5)])
    assert (await slow.get()).seq == 5  # and the stream continues after the snapshot's seq
    assert [(await fast.get()).seq for _ in range(5)] == [1, 2, 3, 4, 5]
    assert slow.overflows == 1

    waiting = asyncio.ensure_future(fast.get())
    await asyncio.sleep(0)
    hub.close()  # the incarnation ended: every stream ends
    assert await waiting is None
    assert hub.subscribers == 0
