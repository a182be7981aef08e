"""KV events: what the worker holds, published per step at chunk granularity with the gateway's
chunk hashes (chunks of 2 blocks here), coalesced, numbered, and replayable as a snapshot."""

from __future__ import annotations

from kvgate.common.clock import ManualClock
from kvgate.index import IndexSettings, MemoryPrefixIndex
from kvgate.proto.events import EventBatch, KVEvent
from kvgate.proto.hashing import chunk_hashes
from kvgate.proto.ids import Epoch, SeqNo, Tier
from kvgate.proto.workers import WorkerInfo, WorkerLoad
from kvgate.workers.kv import Pin
from tests.workers.kv.helpers import CS, ROOT, WORKER, IndexView, S, holdings_from_pools, ids, prompt, rig

T0 = ManualClock().now_ms()
TTL_MS = 300_000
GPU, CPU = Tier.GPU, Tier.CPU


def chunks_of(token_ids: list[int], chunk_size: int = CS) -> list[bytes]:
    """The gateway's chunk hashes of ``token_ids``."""
    return chunk_hashes(token_ids, ROOT.digest(), chunk_size)


def events(r) -> tuple[KVEvent, ...] | None:
    batch = r.publisher.drain()
    return None if batch is None else batch.events


def test_the_first_batch_of_an_epoch_is_cleared() -> None:
    r = rig(gpu=4)
    assert r.publisher.drain() == EventBatch(WORKER, Epoch(1), SeqNo(1), (KVEvent.cleared(),))
    assert r.publisher.drain() is None  # nothing changed: no batch, no seq number used


def test_stored_with_the_gateways_chunk_hashes() -> None:
    r = rig(gpu=8)
    r.kv.admit(S("a"), prompt(ids(0, 17)), 100)  # 4 full blocks = 2 full chunks, + 1 token
    assert r.publisher.drain().events == (KVEvent.cleared(),)  # nothing before the step ends
    r.kv.end_step()
    c0, c1 = chunks_of(ids(0, 17))
    stored = (KVEvent.stored(c0, GPU, T0 + TTL_MS), KVEvent.stored(c1, GPU, T0 + TTL_MS))
    assert r.publisher.drain() == EventBatch(WORKER, Epoch(1), SeqNo(2), stored)
    r.kv.end_step()
    assert r.publisher.drain() is None


def test_ttl_refreshes_are_published_once_per_step() -> None:
    r = rig(gpu=12)
    r.kv.admit(S("a"), prompt(ids(0, 17)), 100)
    r.kv.end_step()
    r.publisher.drain()
    r.clock.advance(10)
    # Two hits on both chunks in one step: one STORED per chunk with the new expiry.
    r.kv.admit(S("b"), prompt(ids(0, 17)), 100)
    r.kv.admit(S("c"), prompt([*ids(0, 16), 99, 98]), 100)
    r.kv.end_step()
    c0, c1 = chunks_of(ids(0, 17))
    assert events(r) == (KVEvent.stored(c0, GPU, T0 + 310_000), KVEvent.stored(c1, GPU, T0 + 310_000))


def test_offloaded_when_some_block_of_the_chunk_moves_to_cpu_then_stored_when_back() -> None:
    r = rig(gpu=5, cpu=4)
    r.kv.admit(S("a"), prompt(ids(0, 16)), 100)  # GPU 0-3: chunks c0 = (0, 1), c1 = (2, 3)
    r.kv.end_step()
    r.kv.free(S("a"))
    r.publisher.drain()
    # b needs 2 blocks: the empty 4 and a's tail block 3, offloaded: c1 is now held in tier CPU.
    r.clock.advance(10)
    r.kv.admit(S("b"), prompt(ids(100, 5)), 100)
    r.kv.end_step()
    c0, c1 = chunks_of(ids(0, 16))
    assert events(r) == (KVEvent.offloaded(c1, T0 + 300_000),)  # the earliest expiry of its blocks
    r.kv.free(S("b"))
    # a again: blocks 0-2 are GPU hits, block 3 is swapped in: c1 is back on the GPU.
    r.clock.advance(10)
    assert r.kv.admit(S("a2"), prompt(ids(0, 17)), 100).swap_in == ((0, 3),)
    r.kv.end_step()
    assert events(r) == (KVEvent.stored(c0, GPU, T0 + 320_000), KVEvent.stored(c1, GPU, T0 + 320_000))


def test_evicted_by_ttl_and_by_pressure() -> None:
    r = rig(gpu=4)
    r.kv.admit(S("a"), prompt(ids(0, 8)), 100)
    r.kv.admit(S("b"), prompt(ids(100, 8)), 100)
    r.kv.end_step()
    r.kv.free(S("a"))
    r.kv.free(S("b"))
    r.publisher.drain()
    r.clock.advance(300)
    assert r.kv.expire() == 4
    r.kv.end_step()
    assert events(r) == (KVEvent.evicted(chunks_of(ids(0, 8))[0]), KVEvent.evicted(chunks_of(ids(100, 8))[0]))
    # Pressure without a CPU tier: c's blocks replace d's.
    r.kv.admit(S("d"), prompt(ids(200, 16)), 100)
    r.kv.end_step()
    r.kv.free(S("d"))
    r.publisher.drain()
    r.kv.admit(S("c"), prompt(ids(300, 8)), 100)
    r.kv.end_step()
    d1 = chunks_of(ids(200, 16))[1]
    assert events(r) == (KVEvent.evicted(d1), KVEvent.stored(chunks_of(ids(300, 8))[0], GPU, T0 + 600_000))


def test_a_move_and_its_return_within_one_step_coalesce() -> None:
    r = rig(gpu=3, cpu=3, cs=4)  # one block per chunk
    for name, start in (("x", 0), ("y", 100), ("z", 200)):
        r.kv.admit(S(name), prompt(ids(start, 4), cs=4), 100)
    r.kv.end_step()
    for name in "xyz":
        r.kv.free(S(name))
    r.publisher.drain()
    r.clock.advance(5)
    # b pushes x's block to the CPU; c brings it back at once: x is simply refreshed on the GPU.
    r.kv.admit(S("b"), prompt(ids(300, 4), cs=4), 100)
    r.kv.admit(S("c"), prompt(ids(0, 5), cs=4), 100)
    r.kv.end_step()
    x, y, z, b = (chunks_of(ids(s, 4), 4)[0] for s in (0, 100, 200, 300))
    exp = T0 + 305_000
    assert events(r) == (
        KVEvent.stored(x, GPU, exp),
        KVEvent.stored(b, GPU, exp),
        KVEvent.offloaded(y, exp),
        KVEvent.offloaded(z, exp),
    )


def test_decode_publishes_new_chunks_under_the_gateways_hash() -> None:
    r = rig(gpu=64, bs=16, cs=128)  # the deployment's sizes
    tokens = ids(1000, 300)
    r.kv.admit(S("a"), prompt(tokens, bs=16, cs=128), 1000)
    r.kv.end_step()
    hashes = chunks_of(tokens, 128)
    assert events(r)[1:] == tuple(KVEvent.stored(h, GPU, T0 + TTL_MS) for h in hashes)
    for token in ids(5000, 84):  # generate up to 384 tokens = 3 full chunks
        r.kv.append_tokens(S("a"), [token])
        r.kv.allocate_slots(S("a"), 1)
        r.kv.end_step()
    third = chunks_of([*tokens, *ids(5000, 84)], 128)[2]
    assert events(r) == (KVEvent.stored(third, GPU, T0 + TTL_MS),)


def test_a_snapshot_holds_everything_and_takes_the_next_seq() -> None:
    r = rig(gpu=8, cpu=4)
    view = IndexView(r.publisher)
    r.kv.admit(S("a"), prompt(ids(0, 17)), 100, pin=Pin(8, 3600))
    r.kv.end_step()
    view.drain()
    r.kv.free(S("a"))
    r.kv.admit(S("b"), prompt(ids(100, 25)), 100)  # offloads a's blocks 3, 2, 1: both chunks to CPU
    r.kv.end_step()
    snapshot = r.publisher.snapshot()  # the changes not drained yet are in it
    assert snapshot.seq == 2
    assert {h.chunk: h for h in snapshot.holdings} == holdings_from_pools(r.kv)
    assert {h.tier for h in snapshot.holdings} == {GPU, CPU}
    assert r.publisher.drain() is None
    r.clock.advance(300)
    r.kv.expire()
    r.kv.end_step()
    assert r.publisher.drain().seq == 3


async def test_the_index_fed_with_the_batches_answers_the_gateways_lookup() -> None:
    r = rig(gpu=40, cpu=8, bs=16, cs=128)
    index = MemoryPrefixIndex(IndexSettings(), r.clock)
    await index.register(WorkerInfo(WORKER, Epoch(1), "127.0.0.1:1", "f" * 32, "test-model"), WorkerLoad())
    tokens = ids(0, 513)  # 4 full chunks (32 blocks) and a token
    r.kv.admit(S("a"), prompt(tokens, bs=16, cs=128), 1000)
    r.kv.end_step()
    assert (await index.apply(r.publisher.drain())).ok
    r.kv.free(S("a"))
    # b takes the 8 empty blocks and a's tail block, which is offloaded: chunk 3 is now in the CPU tier.
    r.kv.admit(S("b"), prompt(ids(10_000, 129), bs=16, cs=128), 1000)
    r.kv.end_step()
    assert (await index.apply(r.publisher.drain())).ok
    assert (await index.lookup(chunks_of(tokens, 128))).matches[WORKER].tiers == "GGGC"
    assert (await index.lookup(chunks_of(ids(10_000, 129), 128))).matches[WORKER].tiers == "G"
