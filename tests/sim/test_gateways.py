"""Several gateway replicas in the simulator: each routes on its own replica, which the workers' events
reach only after the delivery delay."""

from __future__ import annotations

import dataclasses
from collections import Counter

import pytest

from kvgate.gateway.routing.config import RoutingConfig
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


def _conversations(first_s: float) -> list:
    """Six prompts that open with their own 5 blocks, each
    followed by four follow-ups sharing those blocks, one every 4 s from ``first_s`` on; no two
    requests overlap (a busy home worker could lose a follow-up to an idle one)."""
    requests = []
    for c in range(6):
        opening = [100 * c + b for b in range(1, 6)]
        requests.append(req(0.6 * c, [*opening, 100 * c + 50]))
        requests += [req(first_s + 4 * n + 0.6 * c, [*opening, 100 * c + 60 + n]) for n in range(4)]
    return sorted(requests, key=lambda r: r.timestamp_ms)


def test_without_index_events_replicas_still_route_follow_ups_to_the_cache() -> None:
    """No event or load report reaches any of three gateways: each follow-up meets a gateway that
    may never have seen its conversation, and still lands where the opening is cached, because every
    gateway places a new prefix on the same (soft home) worker."""
    blind = SimSettings(workers=4, capacity_tokens=10_000_000, gateways=3, index_events=False)
    result, records = replay("kvgate", _conversations(5), blind)
    assert sum(r.cached_tokens for r in records) == 6 * 4 * 5 * BLOCK  # every follow-up, all 5 blocks
    assert result.hit_rate == pytest.approx(4 * 5 / (5 * 6))


def _multi_turn(conversations: int = 8, turns: int = 5) -> list:
    """Conversations that share a 3-block system prompt; each turn extends the previous one by two
    blocks, 6 s later."""
    requests = []
    for c in range(conversations):
        ids = [1, 2, 3]
        for t in range(turns):
            ids = [*ids, 1000 * (c + 1) + 2 * t, 1000 * (c + 1) + 2 * t + 1]
            requests.append(req(0.5 * c + 6 * t, list(ids)))
    return sorted(requests, key=lambda r: r.timestamp_ms)


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_without_index_events_four_gateways_keep_most_of_a_multi_turn_traces_hits(seed: int) -> None:
    """Most turns meet a gateway that never saw their conversation: it keys the soft home by the
    conversation's own content (where it parts from the shared system prompt) and presumes the
    conversation is cached there, so the turns still find their history."""
    settings = SimSettings(workers=4, capacity_tokens=10_000_000, gateways=4, seed=seed)
    informed, _ = replay("kvgate", _multi_turn(), settings)
    blind, _ = replay("kvgate", _multi_turn(), dataclasses.replace(settings, index_events=False))
    assert blind.hit_rate >= 0.8 * informed.hit_rate


def test_a_lone_gateway_without_index_events_follows_its_own_decisions() -> None:
    blind = SimSettings(workers=4, capacity_tokens=10_000_000, index_events=False)
    _, records = replay("kvgate", _follow_ups(5), blind)
    assert [r.cached_tokens for r in records[1:]] == [3 * BLOCK] * 4
    assert {r.worker for r in records} == {records[0].worker}


def _distinct_burst() -> list:
    """Sixteen prompts of their own 4 blocks, 10 ms apart: a burst that outruns the load reports."""
    return [req(0.01 * n, [100 * n + b for b in range(1, 5)]) for n in range(16)]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_admissions_let_every_gateway_see_the_queues_the_others_fill(seed: int) -> None:
    """Four gateways, four workers: each worker announces every request it takes in, so a gateway
    sees within the event delay the queue that another one just filled and the burst spreads evenly
    (without admissions each gateway learns of the others' requests only at the next load report).
    The contrast runs without the session charge, which spreads each gateway's own new prompts by
    what that gateway sent and would blur what admissions add."""
    settings = SimSettings(workers=4, capacity_tokens=10_000_000, gateways=4, event_delay_s=0.005, seed=seed)
    _, records = replay("kvgate", _distinct_burst(), settings)
    assert sorted(Counter(r.worker for r in records).values()) == [4, 4, 4, 4]
    uncharged = RoutingConfig(session_weight=0.0)
    _, spread = replay("kvgate", _distinct_burst(), settings, uncharged)
    assert sorted(Counter(r.worker for r in spread).values()) == [4, 4, 4, 4]
    silent = dataclasses.replace(settings, admissions=False)
    _, herded = replay("kvgate", _distinct_burst(), silent, uncharged)
    assert max(Counter(r.worker for r in herded).values()) > 4
    assert max(r.ttft_s for r in herded) > max(r.ttft_s for r in spread)
