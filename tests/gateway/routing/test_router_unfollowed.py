"""Workers whose holdings no event stream reports: the router predicts from what it sent there, and
gateways that share nothing place a new prefix alike (its soft home), while followed workers are
routed on the index alone."""

from __future__ import annotations

import dataclasses
from collections import Counter

import numpy as np

from kvgate.common.clock import ManualClock
from kvgate.gateway.routing import RouteReason, get_policy
from kvgate.gateway.routing.presumption import HomePresumption
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
    workers: int = 6, followed: bool = False, clock: ManualClock | None = None, trust: float = 0.5
) -> tuple[Router, list[WorkerStatus]]:
    """A router over ``workers`` registered workers (listed as followed or not); ``trust``: its
    presumptions' starting trust (0: it presumes nothing)."""
    clock = clock or ManualClock()
    index = MemoryPrefixIndex(IndexSettings(), clock)
    for i in range(workers):
        await index.register(info(WorkerId(f"w{i}")), LOAD)
    statuses = [dataclasses.replace(s, followed=followed) for s in await index.workers()]
    policy, fallback = get_policy("kvgate"), get_policy("least_loaded")
    presumption = HomePresumption(initial=trust)
    return Router(index, policy, fallback, CHUNK, 2, clock, presumption=presumption), statuses


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
    router, workers = await gateway(clock=clock, trust=0.0)
    first = tokens(1, 20 * CHUNK)
    hashes = chunk_hashes(first, ROOT, CHUNK)
    routed = await router.route(hashes, len(first), workers, request_key=1)
    router.prefill_done(routed)
    router.forget(routed.decision.worker_id)
    clock.advance(3)
    again = await router.preview(hashes, len(first), workers, request_key=2)
    assert again.decision.predicted_cached_tokens == 0


async def test_a_turn_the_gateway_never_saw_goes_where_another_gateway_placed_its_conversation() -> None:
    """Two gateways that share nothing, both past the conversations that taught them where prompts
    with a common system prompt part ways. Each conversation's first turn goes through gateway A,
    its second through B, which never saw it: both presume the conversation is cached on its soft
    home (its own content is longer than the system prompt they know held elsewhere: worth the
    risk), so B sends the turn where A sent the first, for every conversation; and the
    conversations spread over the fleet (a soft home is keyed by a conversation's own content, not
    by the system prompt they share)."""
    system = tokens(3, 8 * CHUNK)
    a, workers = await gateway()
    b, _ = await gateway()
    for warm in range(4):  # each gateway has seen conversations part ways after the system prompt
        for router in (a, b):
            prompt = np.concatenate([system, tokens(200 + warm, 2 * CHUNK)])
            await router.route(chunk_hashes(prompt, ROOT, CHUNK), len(prompt), workers, warm)
    placed = set()
    for c in range(8):
        first = np.concatenate([system, tokens(300 + c, 10 * CHUNK)])
        one = await a.route(chunk_hashes(first, ROOT, CHUNK), len(first), workers, request_key=10 + c)
        a.prefill_done(one)
        second = np.concatenate([first, tokens(400 + c, 20 * CHUNK)])
        two = await b.route(chunk_hashes(second, ROOT, CHUNK), len(second), workers, request_key=20 + c)
        b.prefill_done(two)
        assert two.presumed is not None
        assert two.decision.worker_id == one.decision.worker_id, c
        placed.add(one.decision.worker_id)
    assert len(placed) >= 3


async def test_a_short_new_prompt_stays_with_the_worker_known_to_hold_its_opening() -> None:
    """Presuming the soft home holds a prompt the gateway never saw risks the opening another worker
    is known to hold: for 2 chunks of own content after 8 of system prompt it is not worth it."""
    system = tokens(3, 8 * CHUNK)
    router, workers = await gateway()
    for warm in range(4):
        prompt = np.concatenate([system, tokens(200 + warm, 2 * CHUNK)])
        await router.route(chunk_hashes(prompt, ROOT, CHUNK), len(prompt), workers, warm)
    holder = (await router.preview(chunk_hashes(system, ROOT, CHUNK), len(system), workers, 0)).decision
    for c in range(8):
        prompt = np.concatenate([system, tokens(300 + c, 2 * CHUNK)])
        routed = await router.preview(chunk_hashes(prompt, ROOT, CHUNK), len(prompt), workers, 10 + c)
        assert routed.decision.worker_id == holder.worker_id  # whichever worker is its soft home
