"""Whole replays of hand-made traces whose answers are known exactly: real hashing, index, router and
policies over simulated workers."""

from __future__ import annotations

import pytest

from kvgate.sim import SimSettings
from kvgate.sim.reference import pooled_hit_rate, unlimited_hit_rate
from kvgate.sim.results import RequestRecord, lost_by_reason
from tests.sim.helpers import BLOCK, cached, replay, req, workload

BIG = SimSettings(workers=4, capacity_tokens=10_000_000)
STEP = BIG.decode_step_s  # the first token costs one decode step after the prefill
TPS = BIG.prefill_tokens_per_s


@pytest.mark.parametrize("policy", ["kvgate", "prefix_affinity"])
@pytest.mark.parametrize("k", [1, 3, 6])
def test_two_requests_sharing_k_blocks_reuse_exactly_k_blocks(policy: str, k: int) -> None:
    shared = list(range(1, k + 1))
    first = req(0, [*shared, 100, 101])
    second = req(10, [*shared, 200], tokens=BLOCK * k + 300)
    result, records = replay(policy, [first, second], BIG)
    assert [r.cached_tokens for r in records] == [0, k * BLOCK]
    assert records[1].predicted_cached_tokens == k * BLOCK  # the index saw the worker's events
    assert records[1].worker == records[0].worker
    assert records[1].reason == "cache_hit"
    assert result.prediction_error == 0


def test_unlimited_and_pooled_references_on_a_hand_made_trace() -> None:
    wl = workload(
        req(0, [1, 2, 3]),  # 1536 tokens, nothing cached
        req(1, [1, 2, 4]),  # shares 2 blocks: 1024
        req(2, [5], tokens=300),  # new: 0
        req(3, [1, 2, 3], tokens=1500),  # 11 full chunks, all held: 1408 (the rest is a partial chunk)
    )
    expected = (0 + 1024 + 0 + 1408) / (1536 + 1536 + 300 + 1500)
    assert unlimited_hit_rate(wl) == pytest.approx(expected)
    assert pooled_hit_rate(wl, BIG) == pytest.approx(expected)
    # 12 chunks pooled (2 workers x 768 tokens): [1,2,4] pushes out block 3 and [5] block 4's tail.
    small = SimSettings(workers=2, capacity_tokens=768)
    assert pooled_hit_rate(wl, small) == pytest.approx((1024 + 1024) / (1536 + 1536 + 300 + 1500))


def test_the_hit_rate_lost_against_the_unlimited_cache_is_told_by_the_decision_reason() -> None:
    # round robin sends the second request to another worker: its 3 shared blocks are lost, under
    # that decision's reason; kvgate keeps the two together and loses nothing
    first, second = req(0, [1, 2, 3, 100]), req(10, [1, 2, 3, 200])
    spread, records = replay("round_robin", [first, second], BIG)
    assert records[0].worker != records[1].worker
    assert spread.lost_by_reason == {records[1].reason: pytest.approx(3 * BLOCK / (8 * BLOCK))}
    together, _ = replay("kvgate", [first, second], BIG)
    assert together.lost_by_reason == {}


def test_losses_count_each_request_against_its_own_unlimited_reuse() -> None:
    records = [_record("cache_hit", cached=0), _record("load_override", cached=0), _record("x", cached=900)]
    # the third reused more than the unlimited cache would have (queued behind a later arrival):
    # not netted against the others' losses
    assert lost_by_reason(records, [0, 512, 512], 3000) == {"load_override": pytest.approx(512 / 3000)}
    assert lost_by_reason(records, [], 3000) == {}
    with pytest.raises(ValueError, match="2 unlimited-cache figures for 3 requests"):
        lost_by_reason(records, [0, 512], 3000)


def _record(reason: str, cached: int) -> RequestRecord:
    return RequestRecord(0, 1000, cached, 0, 0, 0.1, 0.0, reason)


def test_lru_eviction_on_one_worker_keeps_the_head_of_a_chain() -> None:
    # 8 chunks of room: [3] evicts the tail of [1, 2] (block 2), so [1, 2] again reuses block 1 only.
    one = SimSettings(workers=1, capacity_tokens=2 * BLOCK)
    assert cached("kvgate", [req(0, [1, 2]), req(10, [3]), req(20, [1, 2])], one) == [0, 0, BLOCK]


def test_ttl_expires_unused_prefixes_and_each_reuse_refreshes_the_ttl() -> None:
    ttl = SimSettings(workers=1, ttl_s=60)
    trace = [req(0, [1]), req(50, [1]), req(100, [1]), req(200, [1])]
    # t=100 is 100 s after the first use but 50 s after the refresh at t=50; t=200 is past it.
    assert cached("kvgate", trace, ttl) == [0, BLOCK, BLOCK, 0]


def test_round_robin_spreads_a_uniform_trace_exactly_evenly() -> None:
    trace = [req(i * 0.01, [i]) for i in range(16)]
    result, records = replay("round_robin", trace, SimSettings(workers=4))
    assert result.imbalance == 1.0
    assert result.worker_prefill_tokens == [4 * BLOCK] * 4
    assert [r.worker for r in records] == [i % 4 for i in range(16)]


def test_ttft_is_queueing_plus_prefill_plus_one_step() -> None:
    one = SimSettings(workers=1)
    _, records = replay("kvgate", [req(0, [1]), req(0, [2])], one)
    prefill = BLOCK / TPS + STEP
    assert [r.ttft_s for r in records] == pytest.approx([prefill, 2 * prefill])
    assert [r.queue_s for r in records] == pytest.approx([0, prefill])


def test_a_cpu_tier_hit_costs_the_swap_in_not_the_prefill() -> None:
    tiers = SimSettings(workers=1, capacity_tokens=BLOCK, cpu_capacity_tokens=BLOCK)
    _, records = replay("kvgate", [req(0, [1]), req(10, [2]), req(20, [1])], tiers)
    assert records[2].cached_tokens == BLOCK
    assert records[2].swapped_tokens == BLOCK
    assert records[2].ttft_s == pytest.approx(BLOCK / tiers.swap_in_tokens_per_s + STEP)


def test_a_burst_sharing_a_new_prefix_follows_the_first_request() -> None:
    # All arrive before the first prefill ends: the router's pending entries keep them together.
    trace = [req(0.001 * i, [1, 2, 3, 4, 100 + i]) for i in range(4)]
    _, records = replay("kvgate", trace, BIG)
    assert len({r.worker for r in records}) == 1
    assert [r.cached_tokens for r in records] == [0] + [4 * BLOCK] * 3
