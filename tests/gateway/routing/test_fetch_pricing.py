"""The default policy prices a move off the holder of a prompt's prefix as the fetch it will be (the
chosen worker pulls that KV from the holder, a KV source) rather than as recomputing it: the fetch's
seconds in the TTFT and the work, and in full caches the room the copy takes, as computed."""

from __future__ import annotations

import pytest

from kvgate.gateway.routing import RouteReason, RouteRequest, get_policy
from kvgate.gateway.routing.config import RoutingConfig
from kvgate.gateway.routing.cost import estimate, fetches
from kvgate.gateway.routing.types import SharedPrefix
from tests.gateway.routing.test_full_caches import fill
from tests.gateway.routing.test_policies import CHUNK, cand

CONFIG = RoutingConfig()  # prefill 10k tokens/s, fetch 20k tokens/s, sources from 512 tokens
COMPUTING = RoutingConfig(kv_fetch_min_tokens=0)  # no KV sources: a worker computes what it lacks


def test_a_worker_lacking_the_holder_s_run_fetches_it_and_computes_the_rest() -> None:
    e = estimate(cand("b", "GG"), 20 * CHUNK, CHUNK, CONFIG, source_tokens=16 * CHUNK)
    assert e.reused_tokens == 2 * CHUNK  # what b holds; the fetched run is no reuse of its own
    assert e.fetch_s == pytest.approx(14 * CHUNK / 20_000)
    assert e.prefill_s == pytest.approx(4 * CHUNK / 10_000)
    assert e.fetched_s == pytest.approx(14 * CHUNK / 10_000)
    assert e.ttft_s == pytest.approx(e.fetch_s + e.prefill_s)
    # the holder itself fetches nothing; a run past the prompt is capped at it
    assert estimate(cand("a", "G" * 16), 20 * CHUNK, CHUNK, CONFIG, source_tokens=16 * CHUNK).fetch_s == 0
    capped = estimate(cand("b"), 10 * CHUNK, CHUNK, CONFIG, source_tokens=16 * CHUNK)
    assert (capped.fetch_s, capped.prefill_s) == (pytest.approx(10 * CHUNK / 20_000), 0.0)


def test_no_fetch_below_the_minimum_or_where_fetching_is_no_faster() -> None:
    def fetch_s(config: RoutingConfig, held: str = "") -> float:
        return estimate(cand("b", held), 20 * CHUNK, CHUNK, config, source_tokens=8 * CHUNK).fetch_s

    assert fetch_s(CONFIG) > 0
    assert fetch_s(CONFIG, "G" * 5) == 0  # 3 chunks (384 tokens) short of the source: computed
    assert fetch_s(COMPUTING) == 0
    slow = RoutingConfig(kv_fetch_tokens_per_s=10_000)
    assert not fetches(slow)
    assert fetch_s(slow) == 0
    assert fetches(CONFIG)


def test_the_fetch_is_work_and_the_copy_of_an_opening_weighs_the_copy_weight() -> None:
    e = estimate(cand("b"), 20 * CHUNK, CHUNK, CONFIG, shared_tokens=4 * CHUNK, source_tokens=16 * CHUNK)
    assert e.fetch_copy_s == pytest.approx(4 * CHUNK / 20_000)
    assert e.copy_s == 0
    assert e.compute_cost(3.0) == pytest.approx(3.0 * e.work_s)
    assert e.compute_cost(3.0, 1.0) == pytest.approx(3.0 * (e.work_s - e.fetch_copy_s) + e.fetch_copy_s)
    # the room weight prices the fetched tokens' room at their prefill seconds, beyond the fetch's
    assert e.compute_cost(3.0, 3.0, 6.0) - e.compute_cost(3.0) == pytest.approx(
        6.0 * (e.fetched_s - e.fetch_s)
    )


def follow_up(queue_tokens: int) -> RouteRequest:
    """A 40-chunk follow-up: ``a`` holds 36 chunks of it behind ``queue_tokens`` of queued prefill,
    ``b`` and ``c`` hold nothing and are idle."""
    candidates = (cand("a", "G" * 36, waiting=queue_tokens), cand("b"), cand("c"))
    return RouteRequest(40 * CHUNK, CHUNK, candidates, 0, 3)


def test_a_busy_holder_is_left_sooner_when_its_prefix_can_be_fetched() -> None:
    # staying: the queue; moving: 4,608 tokens fetched (0.23 s) or computed (0.46 s), plus 3x that
    # as work. Behind 1.2 s of queue the fetch pays and the computation does not.
    request = follow_up(12_000)
    moved = get_policy("kvgate", CONFIG).choose(request)
    assert (moved.worker_id != "a", moved.reason) == (True, RouteReason.LOAD_OVERRIDE)
    assert get_policy("kvgate", COMPUTING).choose(request).worker_id == "a"
    # a short queue is still waited for
    assert get_policy("kvgate", CONFIG).choose(follow_up(4_000)).worker_id == "a"


def test_in_full_caches_a_fetch_pays_for_the_room_its_copy_takes() -> None:
    # full caches: the compute weight is 9, of which 6 prices room. Moving costs 0.28 s of fetch and
    # prefill, 9x that as work, and 6 x the 0.23 s the fetched tokens' prefill would have taken
    # beyond the fetch: 4.2 s in all (2.8 s without the room; 5.1 s computed). Staying: the queue,
    # plus 0.51 s for the 512 tokens nobody holds. Behind 3 s of queue the move does not pay...
    assert get_policy("kvgate", CONFIG).choose(fill(follow_up(30_000), 1.0)).worker_id == "a"
    # ... behind 5 s it does
    assert get_policy("kvgate", CONFIG).choose(fill(follow_up(50_000), 1.0)).worker_id != "a"
    # roomy caches: the room is free, and behind 3 s the fetch pays
    assert get_policy("kvgate", CONFIG).choose(fill(follow_up(30_000), 0.5)).worker_id != "a"


def test_a_hot_opening_copied_by_a_fetch_is_reported_replicated() -> None:
    # a holds a much-used 8-chunk opening behind 0.3 s of queue; idle b fetches it from a
    request = RouteRequest(
        10 * CHUNK, CHUNK, (cand("a", "G" * 8, waiting=3_000), cand("b")), 0, 7,
        shared=SharedPrefix(8 * CHUNK, 500.0),
    )  # fmt: skip
    decision = get_policy("kvgate", CONFIG).choose(request)
    assert (decision.worker_id, decision.reason) == ("b", RouteReason.HOT_PREFIX)
