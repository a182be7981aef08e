"""The router's record of where it placed new content lately, and how placement uses it."""

from __future__ import annotations

import math

import pytest

from kvgate.gateway.routing import RouteRequest, get_policy
from kvgate.gateway.routing.config import RoutingConfig
from kvgate.gateway.routing.placed import PlacedContent
from kvgate.proto.ids import WorkerId
from tests.gateway.routing.test_policies import CHUNK, cand
from tests.support.fake_clock import FakeMonotonic

A, B, C = WorkerId("a"), WorkerId("b"), WorkerId("c")


def shares(placed: PlacedContent, *workers: WorkerId) -> tuple[float, ...]:
    return tuple(placed.share(w) for w in workers)


def test_shares_are_decayed_sums_over_the_largest() -> None:
    clock = FakeMonotonic(100.0)
    placed = PlacedContent(half_life_s=10, monotonic=clock)
    assert shares(placed, A, B) == (0.0, 0.0)
    placed.add(A, 1000)
    clock.now += 10  # A's 1,000 are worth 500 now
    placed.add(B, 1000)
    assert shares(placed, A, B, C) == pytest.approx((0.5, 1.0, 0.0))
    placed.forget(B)
    assert shares(placed, A, B) == pytest.approx((1.0, 0.0))


def test_shares_survive_rebasing_after_a_long_run() -> None:
    clock = FakeMonotonic(0.0)
    placed = PlacedContent(half_life_s=1, monotonic=clock)
    placed.add(A, 100)
    clock.now += 1_000  # far past the point where the stored weights are scaled back
    placed.add(B, 100)
    placed.add(A, 100)
    assert shares(placed, A, B) == pytest.approx((1.0, 1.0))
    clock.now += 1
    placed.add(B, 100)
    assert shares(placed, A, B) == pytest.approx((50 / 150, 1.0))  # A: 50 left; B: 50 + 100


def test_rates_are_the_decayed_sums_over_the_decay_s_mean_life() -> None:
    clock = FakeMonotonic(5.0)
    placed = PlacedContent(half_life_s=10, monotonic=clock)
    assert placed.rate(A) == 0.0
    placed.add(A, 1000)
    assert placed.rate(A) == pytest.approx(1000 * math.log(2) / 10)
    clock.now += 10
    assert placed.rate(A) == pytest.approx(500 * math.log(2) / 10)  # half of it left
    placed.add(B, 1000)
    assert placed.rate(B) == pytest.approx(2 * placed.rate(A))


@pytest.mark.parametrize("key", range(8))
def test_a_near_tie_goes_to_the_worker_that_took_the_least_new_content(key: int) -> None:
    # a and b are equally idle and hold nothing: a placement; a took all recent new content
    candidates = (cand("a"), cand("b"))
    config = RoutingConfig(placement_weight=1.0)
    request = RouteRequest(16 * CHUNK, CHUNK, candidates, 0, key, placed={A: 1.0, B: 0.0}.__getitem__)
    assert get_policy("kvgate", config).choose(request).worker_id == "b"


def test_placement_never_overrides_a_clearly_better_choice() -> None:
    # a holds the whole prompt: outside any near-tie window of b, whatever a took lately
    candidates = (cand("a", "G" * 16), cand("b"))
    request = RouteRequest(16 * CHUNK, CHUNK, candidates, 0, 3, placed={A: 1.0, B: 0.0}.__getitem__)
    assert get_policy("kvgate", RoutingConfig(placement_weight=1.0)).choose(request).worker_id == "a"


def test_placement_settings_are_validated() -> None:
    with pytest.raises(ValueError, match="placement_weight"):
        RoutingConfig(placement_weight=1.5)
    with pytest.raises(ValueError, match="placement_half_life_s"):
        RoutingConfig(placement_half_life_s=0)
