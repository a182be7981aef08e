"""Differential test: random workloads give identical answers from the memory and Redis backends."""

from __future__ import annotations

import random
import uuid

import pytest

from kvgate.common.clock import ManualClock
from kvgate.index import MemoryPrefixIndex, PrefixIndex, RedisPrefixIndex, redis_client
from kvgate.proto.events import Holding, KVEvent
from kvgate.proto.ids import Epoch, Tier
from tests.index.conftest import drop_namespace, make_settings
from tests.index.helpers import LOAD, A, B, C, batch, chain, info, snapshot

pytestmark = pytest.mark.redis
WORKERS = (A, B, C)
CHUNKS = chain(*range(12))


def _random_event(rng: random.Random, now: int) -> KVEvent:
    chunk = rng.choice(CHUNKS)
    roll = rng.random()
    if roll < 0.5:
        return KVEvent.stored(chunk, rng.choice((Tier.GPU, Tier.CPU)), now + rng.randint(1, 20) * 1000)
    if roll < 0.7:
        return KVEvent.offloaded(chunk, now + rng.randint(1, 20) * 1000)
    if roll < 0.97:
        return KVEvent.evicted(chunk)
    return KVEvent.cleared()


async def _step(rng: random.Random, indexes: list[PrefixIndex], clock: ManualClock, seqs: dict) -> list:
    """One random operation applied to every index; returns what each answered."""
    worker = rng.choice(WORKERS)
    roll = rng.random()
    if roll < 0.55:
        seqs[worker] += rng.choice((1, 1, 1, 1, 2))  # sometimes a lost batch: a gap
        events = [_random_event(rng, clock.now_ms()) for _ in range(rng.randint(1, 4))]
        return [await ix.apply(batch(worker, seqs[worker], *events)) for ix in indexes]
    if roll < 0.65:
        seqs[worker] = 0
        return [await ix.register(info(worker), LOAD) for ix in indexes]
    if roll < 0.75:
        prefix = CHUNKS[: rng.randint(1, len(CHUNKS))]
        return [await ix.add_pending(prefix, worker) for ix in indexes]
    if roll < 0.8:
        return [await ix.purge(worker) for ix in indexes]
    if roll < 0.85:
        seqs[worker] += 1
        held = [Holding(c, Tier.GPU, clock.now_ms() + 9000) for c in rng.sample(CHUNKS, rng.randint(0, 6))]
        return [await ix.resync(snapshot(worker, seqs[worker], held)) for ix in indexes]
    if roll < 0.92:
        return [await ix.heartbeat(worker, Epoch(1), LOAD) for ix in indexes]
    clock.advance(rng.uniform(0, 4))
    return [None for _ in indexes]


@pytest.mark.parametrize("seed", range(6))
async def test_memory_and_redis_backends_agree(redis_url: str, seed: int) -> None:
    rng = random.Random(seed)
    clock = ManualClock()
    namespace = f"kvgate-test-{uuid.uuid4().hex[:12]}"
    settings = make_settings(namespace)
    redis_index = RedisPrefixIndex(redis_client(redis_url, settings), settings, clock, server_time=False)
    indexes: list[PrefixIndex] = [MemoryPrefixIndex(settings, clock), redis_index]
    for ix in indexes:
        for worker in WORKERS:
            await ix.register(info(worker), LOAD)
    seqs = dict.fromkeys(WORKERS, 0)
    try:
        for step in range(150):
            answers = await _step(rng, indexes, clock, seqs)
            assert answers[0] == answers[1], f"step {step}"
            start = rng.randrange(len(CHUNKS))
            lookups = [await ix.lookup(CHUNKS[start:]) for ix in indexes]
            assert lookups[0] == lookups[1], f"step {step}"
            statuses = [await ix.workers() for ix in indexes]
            assert statuses[0] == statuses[1], f"step {step}"
    finally:
        await redis_index.close()
        await drop_namespace(redis_url, namespace)
