"""OpeningDemand: decayed request counts per shared opening, bounded."""

from __future__ import annotations

import pytest

from kvgate.gateway.routing.demand import OpeningDemand
from kvgate.proto.ids import ChunkHash

A, B, C = ChunkHash(b"a" * 8), ChunkHash(b"b" * 8), ChunkHash(b"c" * 8)


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def test_counts_halve_every_half_life_and_openings_are_counted_apart() -> None:
    clock = Clock()
    demand = OpeningDemand(half_life_s=10, monotonic=clock)
    for _ in range(8):
        demand.count(A)
    demand.count(B)
    assert demand.uses(A) == pytest.approx(8)
    assert demand.uses(B) == pytest.approx(1)
    assert demand.uses(C) == 0
    clock.t = 20
    assert demand.uses(A) == pytest.approx(2)
    demand.count(A)
    assert demand.uses(A) == pytest.approx(3)


def test_counts_survive_rebasing_after_a_long_run() -> None:
    clock = Clock()
    demand = OpeningDemand(half_life_s=1, monotonic=clock)
    demand.count(A)
    clock.t = 1000.0  # far past the rebase point: old counts vanish, new ones are exact
    demand.count(B)
    demand.count(B)
    assert demand.uses(A) == pytest.approx(0, abs=1e-9)
    assert demand.uses(B) == pytest.approx(2)


def test_the_least_recently_counted_opening_is_dropped_at_the_cap() -> None:
    demand = OpeningDemand(half_life_s=10, monotonic=Clock(), max_entries=2)
    demand.count(A)
    demand.count(B)
    demand.count(A)
    demand.count(C)
    assert len(demand) == 2
    assert demand.uses(B) == 0
    assert demand.uses(A) == pytest.approx(2)


def test_bad_parameters_are_refused() -> None:
    with pytest.raises(ValueError, match="half_life_s"):
        OpeningDemand(half_life_s=0, monotonic=Clock())
    with pytest.raises(ValueError, match="max_entries"):
        OpeningDemand(half_life_s=1, monotonic=Clock(), max_entries=0)
