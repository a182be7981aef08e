"""Routing policies, table-driven: each row is a situation and the decision it must produce."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from kvgate.gateway.routing import (
    PEER_POLICIES,
    Candidate,
    RouteReason,
    RouteRequest,
    get_policy,
    policy_names,
)
from kvgate.gateway.routing.config import RoutingConfig
from kvgate.gateway.routing.home import home_worker
from kvgate.index.types import PrefixMatch
from kvgate.proto.ids import WorkerId
from kvgate.proto.workers import WorkerLoad

CHUNK = 128


def cand(
    name: str,
    tiers: str = "",
    waiting: int = 0,
    running: int = 0,
    free: int = 50,
    queued: int = 0,
    inflight: int = 0,
) -> Candidate:
    """A worker: ``tiers`` is its match (one char per leading chunk), loads as named."""
    load = WorkerLoad(waiting, running, queued, gpu_blocks_total=100, gpu_blocks_free=free)
    wid = WorkerId(name)
    return Candidate(wid, load, PrefixMatch(wid, tiers) if tiers else None, inflight)


@dataclass(frozen=True)
class Row:
    id: str
    policy: str
    candidates: tuple[Candidate, ...]
    expect: str
    reason: RouteReason
    predicted: int
    prompt: int = 16 * CHUNK
    seq: int = 0
    key: int = 0
    home: str | None = None


ROWS = [
    # -- kvgate: minimise TTFT + compute -----------------------------------------------------
    Row(
        "kvgate/longest-gpu-match",
        "kvgate",
        (cand("a", "GGGG"), cand("b", "GGGGGGGG"), cand("c")),
        "b",
        RouteReason.CACHE_HIT,
        8 * CHUNK,
    ),
    Row(
        "kvgate/gpu-beats-equal-cpu",
        "kvgate",
        (cand("a", "CCCCCCCC"), cand("b", "GGGGGGGG")),
        "b",
        RouteReason.CACHE_HIT,
        8 * CHUNK,
    ),
    Row(
        "kvgate/cpu-beats-recompute",
        "kvgate",
        (cand("a", "CCCCCCCC"), cand("b")),
        "a",
        RouteReason.CACHE_HIT,
        8 * CHUNK,
    ),
    Row(
        # 60 running decodes delay a's prefill by 60 x 2 ms: more than the chunk it holds beyond b saves
        "kvgate/running-decodes-delay-the-prefill",
        "kvgate",
        (cand("a", "GGGGGGGGG", running=60), cand("b", "GGGGGGGG")),
        "b",
        RouteReason.LOAD_OVERRIDE,
        8 * CHUNK,
    ),
    Row(
        # a CPU chunk costs a tenth of its prefill to swap in: 12 on the CPU beat 8 on the GPU
        "kvgate/swap-in-costs-a-tenth-of-a-prefill",
        "kvgate",
        (cand("a", "C" * 12), cand("b", "GGGGGGGG")),
        "a",
        RouteReason.CACHE_HIT,
        12 * CHUNK,
    ),
    Row(
        "kvgate/pending-counts-as-reuse",
        "kvgate",
        (cand("a", "PPPPPPPP"), cand("b")),
        "a",
        RouteReason.CACHE_HIT,
        8 * CHUNK,
    ),
    Row(
        "kvgate/queue-outweighs-small-match",
        "kvgate",  # 1 chunk saved vs 3 s of queue
        (cand("a", "G", waiting=30_000), cand("b")),
        "b",
        RouteReason.LOAD_OVERRIDE,
        0,
    ),
    Row(
        "kvgate/match-outweighs-short-queue",
        "kvgate",  # 16 chunks saved vs 0.1 s of queue
        (cand("a", "G" * 16, waiting=1_000), cand("b")),
        "a",
        RouteReason.CACHE_HIT,
        16 * CHUNK,
    ),
    Row(
        "kvgate/hot-spot-skipped",
        "kvgate",  # a full match, but a 12 s queue: over the 10 s floor and 2x the mean, hot; b is
        # the coolest by more than the near-tie window
        (cand("a", "G" * 16, waiting=120_000), cand("b", waiting=500), cand("c", waiting=5_000)),
        "b",
        RouteReason.HOT_PREFIX,
        0,
    ),
    Row(
        # a's 12 s queue is hot, and its 400 chunks save 5 s of prefill: the compute weight would
        # keep the request there (12 s < 0.05 + 3 x 5.1 s), the guard sends it where it answers sooner
        "kvgate/hot-spot-skipped-for-a-sooner-answer",
        "kvgate",
        (cand("a", "G" * 400, waiting=120_000), cand("b", waiting=500), cand("c", waiting=20_000)),
        "b",
        RouteReason.HOT_PREFIX,
        0,
        prompt=400 * CHUNK,
    ),
    Row(
        # a is hot (12 s queue) but is computing the prompt's 140k-token opening: waiting for it
        # (13 s) answers sooner than computing it again on an idle worker (14 s)
        "kvgate/hot-holder-waited-for-when-sooner",
        "kvgate",
        (cand("a", "P" * 1024, waiting=120_000), cand("b", waiting=500), cand("c", waiting=800)),
        "a",
        RouteReason.CACHE_HIT,
        1024 * CHUNK,
        prompt=1100 * CHUNK,
    ),
    Row(
        "kvgate/kv-pressure-counts",
        "kvgate",  # same queue, but a's pool is 99% full
        (cand("a", "G", waiting=4_000, free=1), cand("b", "G", waiting=4_000, free=50)),
        "b",
        RouteReason.CACHE_HIT,
        CHUNK,
    ),
    Row(
        "kvgate/inflight-counts-as-queue",
        "kvgate",
        (cand("a", inflight=8_000), cand("b")),
        "b",
        RouteReason.NEW_PREFIX,
        0,
    ),
    Row(
        "kvgate/no-match-least-queue",
        "kvgate",
        (cand("a", waiting=900), cand("b", waiting=100), cand("c", waiting=500)),
        "b",
        RouteReason.NEW_PREFIX,
        0,
    ),
    Row(
        "kvgate/home-when-nothing-cached",
        "kvgate",
        (cand("a"), cand("b"), cand("c")),
        "b",
        RouteReason.PINNED,
        0,
        home="b",
    ),
    Row(
        "kvgate/cache-beats-home",
        "kvgate",
        (cand("a", "GGGG"), cand("b")),
        "a",
        RouteReason.CACHE_HIT,
        4 * CHUNK,
        home="b",
    ),
    Row(
        # the prompt_cache_key decides between equal caches: b is busier, a would win on load alone
        "kvgate/home-wins-an-equal-cache",
        "kvgate",
        (cand("a", "GGGG"), cand("b", "GGGG", waiting=1000), cand("c")),
        "b",
        RouteReason.PINNED,
        4 * CHUNK,
        home="b",
    ),
    Row(
        "kvgate/home-holding-the-longest-is-a-cache-hit",
        "kvgate",
        (cand("a", "GGGG"), cand("b")),
        "a",
        RouteReason.CACHE_HIT,
        4 * CHUNK,
        home="a",
    ),
    Row(
        # load, not the key, skipped a's chunk: the home then takes it, and the reason says load
        "kvgate/home-after-a-load-override-is-load",
        "kvgate",
        (cand("a", "G", waiting=30_000), cand("b")),
        "b",
        RouteReason.LOAD_OVERRIDE,
        0,
        home="b",
    ),
    Row(
        "kvgate/match-capped-at-prompt",
        "kvgate",
        (cand("a", "G" * 4),),
        "a",
        RouteReason.CACHE_HIT,
        300,
        prompt=300,
    ),
    # -- prefix affinity (SGLang style) -------------------------------------------------------
    Row(
        "affinity/longest-match-over-threshold",
        "prefix_affinity",
        (cand("a", "G" * 9), cand("b", "G" * 12)),
        "b",
        RouteReason.CACHE_HIT,
        12 * CHUNK,
    ),
    Row(
        "affinity/under-threshold-most-free-kv",
        "prefix_affinity",
        (cand("a", "G" * 4, free=10), cand("b", free=80)),
        "b",
        RouteReason.LOAD_BALANCED,
        0,
    ),
    Row(
        "affinity/imbalance-gate",
        "prefix_affinity",
        (cand("a", "G" * 16, running=60), cand("b", running=2)),
        "b",
        RouteReason.LOAD_BALANCED,
        0,
    ),
    # -- baselines -----------------------------------------------------------------------------
    Row(
        "round_robin/cycles",
        "round_robin",
        (cand("a"), cand("b"), cand("c")),
        "b",
        RouteReason.LOAD_BALANCED,
        0,
        seq=4,
    ),
    Row(
        "round_robin/ignores-cache",
        "round_robin",
        (cand("a"), cand("b", "G" * 16)),
        "a",
        RouteReason.LOAD_BALANCED,
        0,
        seq=2,
    ),
    Row(
        "round_robin/reports-what-it-gets",
        "round_robin",
        (cand("a", "GG"), cand("b")),
        "a",
        RouteReason.LOAD_BALANCED,
        2 * CHUNK,
    ),
    Row(
        "least_loaded/shortest-queue",
        "least_loaded",
        (cand("a", waiting=500), cand("b", running=1), cand("c", waiting=300)),
        "b",
        RouteReason.LOAD_BALANCED,
        0,
    ),
    Row(
        "power_of_two/less-loaded-of-pair",
        "power_of_two",  # key 0 draws a and b
        (cand("a", waiting=900), cand("b", waiting=100), cand("c")),
        "b",
        RouteReason.LOAD_BALANCED,
        0,
    ),
    Row(
        "random/by-key", "random", (cand("a"), cand("b"), cand("c")), "c", RouteReason.LOAD_BALANCED, 0, key=5
    ),
]


@pytest.mark.parametrize("row", ROWS, ids=[r.id for r in ROWS])
def test_policy_decisions(row: Row) -> None:
    request = RouteRequest(
        row.prompt, CHUNK, row.candidates, row.seq, row.key, WorkerId(row.home) if row.home else None
    )
    decision = get_policy(row.policy).choose(request)
    assert (decision.worker_id, decision.reason, decision.predicted_cached_tokens) == (
        row.expect,
        row.reason,
        row.predicted,
    )


@pytest.mark.parametrize("key", range(4))
def test_an_exact_tie_goes_to_the_longer_reuse(key: int) -> None:
    """a reuses 4 chunks more than b and has exactly the queue that saving is worth (1,024 tokens:
    twice the 512 tokens' prefill, as TTFT and as compute, b computing them: no KV sources), so
    both score alike; with near-ties off, the longer reuse wins whatever the request key."""
    candidates = (cand("b", "GGGG"), cand("a", "GGGGGGGG", waiting=1024))
    config = RoutingConfig(near_tie_ratio=0.0, decode_step_s=0.0, compute_weight=1.0, kv_fetch_min_tokens=0)
    decision = get_policy("kvgate", config).choose(RouteRequest(16 * CHUNK, CHUNK, candidates, 0, key))
    assert (decision.worker_id, decision.predicted_cached_tokens) == ("a", 8 * CHUNK)


@pytest.mark.parametrize("name", policy_names())
def test_every_policy_is_a_pure_function(name: str) -> None:
    request = RouteRequest(2048, CHUNK, (cand("a", "GG", waiting=100), cand("b", "G"), cand("c")), 7, 99)
    policy = get_policy(name)
    assert len({policy.choose(request) for _ in range(5)}) == 1


def test_power_of_two_never_picks_the_worst_of_three() -> None:
    candidates = (cand("a", waiting=100), cand("b", waiting=9_000), cand("c", waiting=200))
    picks = {
        get_policy("power_of_two").choose(RouteRequest(512, CHUNK, candidates, 0, key)).worker_id
        for key in range(200)
    }
    assert picks == {"a", "c"}


def test_the_peer_names_are_exactly_the_policies_of_the_peers_package() -> None:
    package = "kvgate.gateway.routing.peers."
    from_peers = [n for n in policy_names() if type(get_policy(n)).__module__.startswith(package)]
    assert list(PEER_POLICIES) == from_peers


def test_unknown_policy_names_the_known_ones() -> None:
    with pytest.raises(ValueError, match="round_robin"):
        get_policy("fastest")


def test_a_request_needs_a_candidate() -> None:
    with pytest.raises(ValueError, match="candidate"):
        RouteRequest(10, CHUNK, ())


def test_config_is_validated() -> None:
    with pytest.raises(ValueError, match="kv_pressure_threshold"):
        RoutingConfig(kv_pressure_threshold=1.0)


def test_home_worker_is_stable_when_other_workers_leave() -> None:
    workers = [WorkerId(f"w{i}") for i in range(8)]
    homes = {key: home_worker(key, workers) for key in map(str, range(400))}
    remaining = [w for w in workers if w != "w3"]
    moved = {key for key in homes if home_worker(key, remaining) != homes[key]}
    assert moved == {key for key, home in homes.items() if home == "w3"}
    assert 20 < len(moved) < 80  # about 1/8 of the keys
    assert home_worker("k", []) is None
