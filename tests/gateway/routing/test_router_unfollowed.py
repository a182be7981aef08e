"""Workers whose holdings no event stream reports: the router predicts from what it sent there, and
gateways that share nothing place a new prefix alike (its soft home), while followed workers are
routed on the index alone."""

from __future__ import annotations

import dataclasses
from collections import Counter

import numpy as np

from kvgate.common.clock import ManualClock
from kvgate.gateway.routing import RouteReason, get_policy
from kvgate.gateway.routing.router import Router
from kvgate.index import IndexSettings, MemoryPrefixIndex, WorkerStatus
from kvgate.proto.hashing import HashRoot, chunk_hashes
from kvgate.proto.ids import WorkerId
from kvgate.proto.layout import DEFAULT_CHUNK_SIZE as CHUNK
from kvgate.proto.workers import WorkerLoad
from tests.index.helpers import info

ROOT = HashRoot(b"", "m").digest()
LOAD = WorkerLoad(gpu_blocks_total=10_000, gpu_blocks_free=10_000)


async def gateway(
    workers: int = 6, followed: bool = False, clock: ManualClock | None = None
) -> tuple[Router, list[WorkerStatus]]:
    clock = clock or ManualClock()
    index = MemoryPrefixIndex(IndexSettings(), clock)
    for i in range(workers):
        await index.register(info(WorkerId(f"w{i}")), LOAD)
    statuses = [dataclasses.replace(s, followed=followed) for s in await index.workers()]
    return Router(index, get_policy("kvgate"), get_policy("least_loaded"), CHUNK, 2, clock), statuses


def tokens(seed: int, n: int) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 50_000, n).astype(np.uint32)


async def test_follow_ups_go_where_this_gateway_sent_the_prefix() -> None:
    clock = ManualClock()
    router, workers = await gateway(clock=clock)
    first = tokens(1, 20 * CHUNK)
    routed = await router.route(chunk_hashes(first, ROOT, CHUNK), len(first), workers, request_key=1)
    router.prefill_done(routed)
    clock.advance(60)  # past the burst record, within the KV TTL
    follow_up = np.concatenate([first, tokens(2, 3 * CHUNK)])
    again = await router.route(chunk_hashes(follow_up, ROOT, CHUNK), len(follow_up), workers, request_key=2)
    assert again.decision.worker_id == routed.decision.worker_id
    assert again.decision.predicted_cached_tokens == len(first)
    assert again.decision.reason is RouteReason.CACHE_HIT


async def test_gateways_that_share_nothing_place_a_new_prefix_on_one_worker() -> None:
    """Eight separate gateways, each sees one request of prompts that share their first 2,048
    tokens (the soft home's key) and differ after: all eight pick the same worker, whatever the
    request key; prompts with other openings spread over the fleet."""
    shared = tokens(7, 16 * CHUNK)
    picks = []
    for g in range(8):
        router, workers = await gateway()
        prompt = np.concatenate([shared, tokens(100 + g, 5 * CHUNK)])
        routed = await router.route(chunk_hashes(prompt, ROOT, CHUNK), len(prompt), workers, request_key=g)
        picks.append(routed.decision.worker_id)
    assert len(set(picks)) == 1, picks
    spread = Counter()
    for seed in range(60):
        router, workers = await gateway()
        prompt = tokens(1000 + seed, 18 * CHUNK)
        routed = await router.route(chunk_hashes(prompt, ROOT, CHUNK), len(prompt), workers, request_key=seed)
        spread[routed.decision.worker_id] += 1
    assert len(spread) == 6, spread


async def test_followed_workers_are_routed_on_the_index_alone() -> None:
    clock = ManualClock()
    router, workers = await gateway(followed=True, clock=clock)
    first = tokens(1, 20 * CHUNK)
    routed = await router.route(chunk_hashes(first, ROOT, CHUNK), len(first), workers, request_key=1)
    router.prefill_done(routed)
    follow_up = np.concatenate([first, tokens(2, 3 * CHUNK)])
    hashes = chunk_hashes(follow_up, ROOT, CHUNK)
    clock.advance(3)  # past the short-lived burst record (2 s), well within the KV TTL
    again = await router.preview(hashes, len(follow_up), workers, request_key=2)
    assert again.decision.predicted_cached_tokens == 0  # no event said the worker holds it


async def test_a_failed_worker_is_forgotten() -> None:
    clock = ManualClock()
    router, workers = await gateway(clock=clock)
    first = tokens(1, 20 * CHUNK)
    hashes = chunk_hashes(first, ROOT, CHUNK)
    routed = await router.route(hashes, len(first), workers, request_key=1)
    router.prefill_done(routed)
    router.forget(routed.decision.worker_id)
    clock.advance(3)
    again = await router.preview(hashes, len(first), workers, request_key=2)
    assert again.decision.predicted_cached_tokens == 0
