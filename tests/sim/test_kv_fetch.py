"""A request moved off a busy holder fetches the holder's prefix instead of computing it."""

from __future__ import annotations

from dataclasses import replace

import pytest

from kvgate.gateway.routing.config import RoutingConfig
from kvgate.sim import SimSettings
from tests.sim.helpers import BLOCK, replay, req

OPENING = list(range(1, 17))  # 8,192 tokens that every request of the burst starts with
SETTINGS = SimSettings(workers=2, capacity_tokens=200_000, kv_fetch_tokens_per_s=40_000)
NO_WARM_UPS = RoutingConfig(warm_demand=0)  # the opening reaches a second worker only by a move


def burst() -> list:
    """The opening alone, then (once it is cached) six prompts that start with it, at one instant,
    each with 8k tokens of its own: the holder's queue grows until moving one pays."""
    own = [[100 * k + j for j in range(16)] for k in range(1, 7)]
    return [req(0.0, OPENING), *(req(2.0, OPENING + tail) for tail in own)]


def test_a_moved_request_fetches_the_opening_from_its_holder() -> None:
    result, records = replay("kvgate", burst(), SETTINGS, NO_WARM_UPS)
    holder = records[0].worker
    moved = [r for r in records[1:] if r.worker != holder]
    assert moved, "the burst never left the holder: no fetch to test"
    opening = len(OPENING) * BLOCK
    first = moved[0]
    assert first.reason in ("load_override", "hot_prefix_replicated")
    assert first.fetched_tokens == opening  # the whole opening came from the holder
    assert all(r.cached_tokens >= opening for r in moved)  # later ones reuse what it fetched
    assert all(r.fetched_tokens == 0 for r in moved[1:])
    assert result.fetch_rate == pytest.approx(sum(r.fetched_tokens for r in records) / result_prompt(records))


def test_without_fetching_the_moved_request_computes_the_opening() -> None:
    _, fetching = replay("kvgate", burst(), SETTINGS, NO_WARM_UPS)
    result, records = replay("kvgate", burst(), replace(SETTINGS, kv_fetch_tokens_per_s=0), NO_WARM_UPS)
    assert result.fetch_rate == 0
    assert all(r.fetched_tokens == 0 for r in records)
    assert sum(r.cached_tokens for r in fetching) > sum(r.cached_tokens for r in records)


def test_the_fetch_takes_its_time_before_the_prefill() -> None:
    _, fast = replay("kvgate", burst(), replace(SETTINGS, kv_fetch_tokens_per_s=1e9), NO_WARM_UPS)
    _, slow = replay("kvgate", burst(), replace(SETTINGS, kv_fetch_tokens_per_s=4_096), NO_WARM_UPS)
    first_fast = next(r for r in fast[1:] if r.fetched_tokens)
    first_slow = next(r for r in slow[1:] if r.fetched_tokens)
    # 8,192 tokens at 4,096 tokens/s: two seconds before the request can even queue
    assert first_slow.ttft_s >= first_fast.ttft_s + 2.0 - 0.01


def test_a_policy_without_sources_never_fetches() -> None:
    result, records = replay("least_loaded", burst(), SETTINGS)
    assert any(r.worker != records[0].worker for r in records[1:])  # it left the holder...
    assert result.fetch_rate == 0  # ...and computed what it did not hold there
    assert all(r.fetched_tokens == 0 for r in records)


def result_prompt(records: list) -> int:
    return sum(r.prompt_tokens for r in records)
