"""A copy into a full cache evicts what later prompts would reuse: as the candidates' GPU tiers fill
past ``full_cache_threshold``, the compute weight grows by up to ``full_cache_weight``, and demand
and sessions stop paying for copies."""

from __future__ import annotations

import dataclasses

import pytest

from kvgate.common.clock import SystemClock
from kvgate.gateway.routing import RouteReason, RouteRequest, get_policy
from kvgate.gateway.routing.config import RoutingConfig
from kvgate.gateway.routing.cost import fullness, occupancy
from kvgate.gateway.routing.router import Router
from kvgate.gateway.routing.types import Candidate, SharedPrefix
from kvgate.index import PrefixIndex
from kvgate.proto.events import EventBatch, KVEvent
from kvgate.proto.hashing import chunk_hashes
from kvgate.proto.ids import SeqNo, Tier
from kvgate.proto.units import BlockCount, TokenCount
from kvgate.proto.workers import WorkerLoad
from tests.gateway.routing.test_policies import CHUNK, cand
from tests.gateway.routing.test_router import ROOT, WORKERS, index, prompt  # noqa: F401 (index: a fixture)
from tests.gateway.routing.test_sessions import new_session
from tests.index.helpers import info


def filled(candidate: Candidate, occupied: float) -> Candidate:
    """``candidate`` with ``occupied`` of its 100-block GPU tier holding KV: its own blocks in use,
    the rest of that cached."""
    load = candidate.load
    used = load.gpu_blocks_total - load.gpu_blocks_free
    cached = BlockCount(max(round(occupied * load.gpu_blocks_total) - used, 0))
    return dataclasses.replace(candidate, load=dataclasses.replace(load, gpu_blocks_cached=cached))


def fill(request: RouteRequest, occupied: float) -> RouteRequest:
    return dataclasses.replace(request, candidates=tuple(filled(c, occupied) for c in request.candidates))


def test_fullness_rises_from_the_threshold_to_one_over_the_reporting_candidates() -> None:
    config = RoutingConfig()  # threshold 0.9

    def full(*candidates: Candidate) -> float:
        return fullness(occupancy(candidates), config)

    a, b = cand("a"), cand("b")  # 50 of 100 blocks in use, none cached
    assert occupancy((a, b)) == pytest.approx(0.5)
    assert full(a, b) == 0.0
    assert full(filled(a, 0.95), filled(b, 0.95)) == pytest.approx(0.5)
    assert full(filled(a, 1.0), filled(b, 1.0)) == pytest.approx(1.0)
    assert full(filled(a, 1.0), filled(b, 0.9)) == pytest.approx(0.5)  # the mean
    # a worker that reports no GPU tier does not count; none reporting: nothing is known
    unknown = dataclasses.replace(cand("c"), load=WorkerLoad())
    assert full(filled(a, 1.0), unknown) == pytest.approx(1.0)
    assert occupancy((unknown,)) is None
    assert fullness(None, config) == 0.0


def test_a_caller_s_occupancy_is_taken_over_the_candidates() -> None:
    # the router gives the fleet's occupancy, computed once per heartbeat: the policy uses it
    request = RouteRequest(10 * CHUNK, CHUNK, (cand("a", "G" * 8, waiting=7_000), cand("b")), 0, 7)
    assert get_policy("kvgate").choose(dataclasses.replace(request, occupancy=1.0)).worker_id == "a"
    roomy = dataclasses.replace(fill(request, 1.0), occupancy=0.5)
    assert get_policy("kvgate").choose(roomy).worker_id == "b"


def test_a_full_cache_keeps_a_prompt_waiting_on_its_prefix_holder_longer() -> None:
    # a holds 8 of the 10 chunks with 0.7 s of queue; b is idle. Copying 1,024 tokens (0.1 s of
    # prefill) weighs 3x with room to spare (b wins), 9x when the caches are full (a wins).
    request = RouteRequest(10 * CHUNK, CHUNK, (cand("a", "G" * 8, waiting=7_000), cand("b")), 0, 7)
    roomy = get_policy("kvgate").choose(fill(request, 0.6))
    assert (roomy.worker_id, roomy.reason) == ("b", RouteReason.LOAD_OVERRIDE)
    full = get_policy("kvgate").choose(fill(request, 1.0))
    assert (full.worker_id, full.reason) == ("a", RouteReason.CACHE_HIT)
    off = get_policy("kvgate", RoutingConfig(full_cache_weight=0.0)).choose(fill(request, 1.0))
    assert off.worker_id == "b"


def test_a_full_cache_stops_sessions_spreading_over_copies_of_their_opening() -> None:
    # the new session of test_sessions that leaves the busy holder of its opening (b copies it)
    session = new_session("G" * 8, {"a": 0.5, "b": 0.0})
    assert get_policy("kvgate").choose(fill(session, 0.5)).worker_id == "b"
    assert get_policy("kvgate").choose(fill(session, 1.0)).worker_id == "a"
    # no full-cache weight: only the session charge's discount keeps it
    keeps = get_policy("kvgate", RoutingConfig(full_cache_weight=0.0)).choose(fill(session, 1.0))
    assert keeps.worker_id == "a"


def test_a_full_cache_stops_demand_paying_for_a_copy() -> None:
    # a holds a much-used 8-chunk opening behind 0.3 s of queue: at the plain compute weight a
    # copy computed on idle b does not pay (0.31 s of weighted compute against 0.3 s of queue), but
    # demand (500 requests lately, one holder) spreads its cost -- until the caches are full
    request = RouteRequest(
        10 * CHUNK, CHUNK, (cand("a", "G" * 8, waiting=3_000), cand("b")), 0, 7,
        shared=SharedPrefix(8 * CHUNK, 500.0),
    )  # fmt: skip
    # the compute weight stays 3 (only demand changes); b computes the copy (no KV sources)
    plain = RoutingConfig(full_cache_weight=0.0, kv_fetch_min_tokens=0)
    roomy = get_policy("kvgate", plain).choose(fill(request, 0.6))
    assert (roomy.worker_id, roomy.reason) == ("b", RouteReason.HOT_PREFIX)
    full = get_policy("kvgate", plain).choose(fill(request, 1.0))
    assert (full.worker_id, full.reason) == ("a", RouteReason.CACHE_HIT)


def test_the_full_cache_settings_are_validated() -> None:
    with pytest.raises(ValueError, match="full_cache_threshold"):
        RoutingConfig(full_cache_threshold=1.0)
    with pytest.raises(ValueError, match="full_cache_weight"):
        RoutingConfig(full_cache_weight=-1.0)


async def test_the_router_weighs_copies_by_how_full_the_reported_caches_are(
    index: PrefixIndex,  # noqa: F811 (the fixture)
) -> None:
    """Through the real index: the first worker holds 8 of a prompt's 10 chunks behind 0.7 s of
    queue. While the workers' heartbeats report every GPU block holding KV (cached), the prompt
    waits for the holder; once they report room, it goes to an idle worker. (Full first: the first
    decision's pending entries then sit on the holder, who holds the prompt either way.)"""
    text = prompt(7, 10 * CHUNK)
    hashes = chunk_hashes(text, ROOT, CHUNK)
    holder = WORKERS[0]
    until = SystemClock().now_ms() + 600_000
    stored = tuple(KVEvent.stored(h, Tier.GPU, until) for h in hashes[:8])
    assert (await index.apply(EventBatch(holder, info(holder).epoch, SeqNo(1), stored))).ok
    chosen = []
    for cached in (100, 0):  # full, then roomy
        for worker in WORKERS:
            load = WorkerLoad(
                waiting_prefill_tokens=TokenCount(7_000 if worker == holder else 0),
                gpu_blocks_total=BlockCount(100), gpu_blocks_free=BlockCount(100),
                gpu_blocks_cached=BlockCount(cached),
            )  # fmt: skip
            assert await index.heartbeat(worker, info(worker).epoch, load)
        router = Router(index, get_policy("kvgate"), get_policy("least_loaded"), CHUNK, 2, SystemClock())
        routed = await router.route(hashes, len(text), await index.workers(), request_key=3)
        await router.drain()  # its pending entries are written before the next decision reads
        chosen.append(routed.decision.worker_id)
    assert chosen[0] == holder
    assert chosen[1] != holder
