"""What the engine publishes reaches the index: its event batches, applied to a real
``MemoryPrefixIndex``, answer the gateway's lookup of a prompt's chunk hashes (128-token chunks)."""

from __future__ import annotations

import numpy as np

from kvgate.common.clock import ManualClock
from kvgate.index import IndexSettings, MemoryPrefixIndex
from kvgate.proto.hashing import chunk_hashes
from kvgate.proto.ids import Epoch
from kvgate.proto.layout import CacheLayout
from kvgate.proto.workers import WorkerInfo, WorkerLoad
from kvgate.workers.engine import LLMEngine, run_to_completion
from tests.workers.engine.conftest import TinyPair
from tests.workers.engine.helpers import WORKER, engine_for, greedy, random_ids, request

CACHE = CacheLayout("tiny-llama", secret=b"test")  # blocks of 16, chunks of 128: the deployment default


async def _index_fed_by(engine: LLMEngine, clock: ManualClock) -> MemoryPrefixIndex:
    index = MemoryPrefixIndex(IndexSettings(), clock)
    info = WorkerInfo(WORKER, Epoch(1), "127.0.0.1:1", CACHE.fingerprint(), CACHE.model_id)
    await index.register(info, engine.load())
    for batch in engine.take_events():
        assert (await index.apply(batch)).ok
    return index


def _gateway_hashes(prompt: list[int]) -> list[bytes]:
    return chunk_hashes(np.asarray(prompt, dtype=np.uint32), CACHE.root().digest(), 128)


async def test_the_index_finds_the_prompts_chunks_on_the_gpu_then_on_the_cpu(tiny: TinyPair) -> None:
    clock = ManualClock()
    engine = engine_for(tiny.ours, gpu_blocks=24, cpu_blocks=32, cache=CACHE, clock=clock)  # 384 slots
    prompt = random_ids(300, seed=60)  # 2 full chunks
    run_to_completion(engine, [request("a", prompt)])
    index = await _index_fed_by(engine, clock)
    assert (await index.lookup(_gateway_hashes(prompt))).matches[WORKER].tiers == "GG"
    assert (await index.lookup(_gateway_hashes([*prompt[:130], 5, 6]))).matches[WORKER].tiers == "G"
    # A 380-token filler takes every GPU block: the prompt's blocks are offloaded to the CPU tier.
    run_to_completion(engine, [request("filler", random_ids(380, seed=61), greedy(1))])
    for batch in engine.take_events():
        assert (await index.apply(batch)).ok
    assert (await index.lookup(_gateway_hashes(prompt))).matches[WORKER].tiers == "CC"
    assert engine.last_event_seq == engine.publisher.snapshot().seq - 1


async def test_a_snapshot_replaces_the_queued_batches(tiny: TinyPair) -> None:
    clock = ManualClock()
    engine = engine_for(tiny.ours, gpu_blocks=24, cache=CACHE, clock=clock)
    prompt = random_ids(200, seed=62)
    run_to_completion(engine, [request("a", prompt)])
    snapshot = engine.snapshot()
    assert engine.take_events() == []
    assert len(snapshot.holdings) == 1
    index = MemoryPrefixIndex(IndexSettings(), clock)
    await index.register(WorkerInfo(WORKER, Epoch(1), "127.0.0.1:1", CACHE.fingerprint(), CACHE.model_id),
                         WorkerLoad())  # fmt: skip
    assert (await index.resync(snapshot)).ok
    assert (await index.lookup(_gateway_hashes(prompt))).matches[WORKER].tiers == "G"
