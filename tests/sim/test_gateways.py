"""Several gateway replicas in the simulator: each routes on its own replica, which the workers' events
reach only after the delivery delay."""

from __future__ import annotations

from kvgate.sim import SimSettings
from tests.sim.helpers import BLOCK, replay, req


def _follow_ups(first_s: float) -> list:
    """A request, then four more sharing its 3 blocks, one every second from ``first_s`` on."""
    return [req(0, [1, 2, 3, 9]), *(req(first_s + n, [1, 2, 3, 10 + n]) for n in range(4))]


def test_replicas_that_the_workers_events_reach_route_follow_ups_to_the_cache() -> None:
    settings = SimSettings(workers=4, capacity_tokens=10_000_000, gateways=3, event_delay_s=0.05)
    _, records = replay("kvgate", _follow_ups(5), settings)
    assert [r.cached_tokens for r in records[1:]] == [3 * BLOCK] * 4  # every gateway learned it
    assert {r.worker for r in records} == {records[0].worker}


def test_a_replica_the_events_have_not_reached_yet_cannot_know() -> None:
    """The same trace, the events a minute late: the other gateways route the follow-ups blind (each
    follows only its own decisions), so some land where nothing is cached."""
    late = SimSettings(workers=4, capacity_tokens=10_000_000, gateways=3, event_delay_s=60.0)
    _, records = replay("kvgate", _follow_ups(5), late)
    assert sum(r.cached_tokens for r in records[1:]) < 4 * 3 * BLOCK
