"""Near-ties are broken at random per request (so replicas with one view do not herd), within the
window only, reproducibly, and never against the home worker."""

from __future__ import annotations

from collections import Counter

from kvgate.gateway.routing import Candidate, RouteReason, RouteRequest
from kvgate.gateway.routing.config import RoutingConfig
from kvgate.gateway.routing.kvgate_policy import KvgatePolicy
from kvgate.index.types import PrefixMatch
from kvgate.proto.ids import WorkerId
from kvgate.proto.workers import WorkerLoad

CHUNK = 128
PROMPT = 16 * CHUNK  # 0.2048 s of prefill at the default 10k tokens/s; the score is twice that


def cand(name: str, waiting: int = 0, tiers: str = "") -> Candidate:
    wid = WorkerId(name)
    load = WorkerLoad(waiting, 0, 0, gpu_blocks_total=100, gpu_blocks_free=50)
    return Candidate(wid, load, PrefixMatch(wid, tiers) if tiers else None)


def picks(policy: KvgatePolicy, candidates: tuple[Candidate, ...], keys: int = 3000, home: str | None = None):
    home_id = WorkerId(home) if home else None
    return Counter(
        policy.choose(RouteRequest(PROMPT, CHUNK, candidates, 0, key * 7919, home_id)).worker_id
        for key in range(keys)
    )


def test_exact_ties_spread_evenly_over_request_keys() -> None:
    counts = picks(KvgatePolicy(), (cand("a"), cand("b"), cand("c")))
    assert set(counts) == {"a", "b", "c"}
    assert all(800 < n < 1200 for n in counts.values()), counts


def test_a_near_tie_wins_sometimes_and_a_choice_outside_the_window_never() -> None:
    # scores: a 0.4096 s; b +0.02 s of queue (5%: inside the 10% window); c +0.1 s (outside)
    candidates = (cand("a"), cand("b", waiting=200), cand("c", waiting=1000))
    counts = picks(KvgatePolicy(), candidates)
    assert counts["c"] == 0
    assert 300 < counts["b"] < counts["a"], counts  # the handicap favours the better score


def test_without_a_window_ties_rotate_by_key_as_before() -> None:
    policy = KvgatePolicy(RoutingConfig(near_tie_ratio=0.0))
    candidates = (cand("a"), cand("b", waiting=200), cand("c"))
    counts = picks(policy, candidates)
    assert set(counts) == {"a", "c"}
    assert min(counts.values()) >= 900, counts


def test_the_home_worker_wins_its_near_ties() -> None:
    candidates = (cand("a"), cand("b", waiting=200), cand("c"))
    assert picks(KvgatePolicy(), candidates, home="b") == Counter(b=3000)


def test_a_cache_hit_is_not_traded_for_an_idle_worker_outside_the_window() -> None:
    candidates = (cand("a", waiting=1000, tiers="G" * 12), cand("b"), cand("c"))
    counts = picks(KvgatePolicy(), candidates, keys=500)
    assert counts == Counter(a=500)
    decision = KvgatePolicy().choose(RouteRequest(PROMPT, CHUNK, candidates, 0, 1))
    assert decision.reason is RouteReason.CACHE_HIT


def test_the_same_request_key_gets_the_same_worker() -> None:
    request = RouteRequest(PROMPT, CHUNK, (cand("a"), cand("b"), cand("c")), 0, 123456789)
    assert len({KvgatePolicy().choose(request) for _ in range(5)}) == 1
