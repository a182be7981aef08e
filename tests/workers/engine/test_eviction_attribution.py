"""What a worker reports when it reuses less than the router predicted, and the tier figures it sends
with each heartbeat. The tiny model, blocks of 4 tokens, chunks of 8 (``TINY_CACHE``), a manual clock,
the default TTL of 300 s."""

from __future__ import annotations

from kvgate.common.clock import ManualClock
from kvgate.proto.sampling import Usage
from kvgate.workers.engine import LLMEngine, run_to_completion
from tests.workers.engine.conftest import TinyPair
from tests.workers.engine.helpers import engine_for, greedy, random_ids, request

PREFIX = random_ids(24, seed=7)  # 3 chunks; a prompt of PREFIX + 2 tokens can reuse all 24 tokens
TTL_S = 300


def finish(engine: LLMEngine, request_id: str) -> Usage:
    """Steps ``engine`` until ``request_id`` finishes; its usage."""
    while True:
        for out in engine.step():
            if out.request_id == request_id and out.finished:
                assert out.usage is not None
                return out.usage


def warm(tiny: TinyPair) -> tuple[LLMEngine, ManualClock]:
    """An engine whose cache holds PREFIX (from a finished request)."""
    clock = ManualClock()
    engine = engine_for(tiny.ours, gpu_blocks=32, clock=clock)
    run_to_completion(engine, [request("a", [*PREFIX, 1, 2, 3], greedy(2))])
    return engine, clock


def test_a_prefix_evicted_while_the_request_waits_is_lost_to_eviction(tiny: TinyPair) -> None:
    engine, clock = warm(tiny)
    engine.add_request(request("b", [*PREFIX, 4, 5], greedy(2), predicted_cached_tokens=24))
    clock.advance(TTL_S + 1)  # the next step takes b, then expires the prefix, then admits b
    usage = finish(engine, "b")
    assert (usage.cached_tokens, usage.evicted_predicted_tokens) == (0, 24)
    assert engine.counters().evicted_predicted_tokens == 24


def test_a_prefix_evicted_before_the_request_arrived_is_not(tiny: TinyPair) -> None:
    engine, clock = warm(tiny)
    clock.advance(TTL_S + 1)
    engine.step()  # idle: the prefix expires; the index would learn it from this step's events
    engine.add_request(request("b", [*PREFIX, 4, 5], greedy(2), predicted_cached_tokens=24))
    usage = finish(engine, "b")
    assert (usage.cached_tokens, usage.evicted_predicted_tokens) == (0, 0)  # the gateway's index was stale


def test_a_prefix_never_held_is_not(tiny: TinyPair) -> None:
    engine, clock = warm(tiny)
    engine.add_request(request("b", random_ids(26, seed=8), greedy(2), predicted_cached_tokens=24))
    clock.advance(TTL_S + 1)  # evictions happen, but not of b's prefix
    usage = finish(engine, "b")
    assert (usage.cached_tokens, usage.evicted_predicted_tokens) == (0, 0)


def test_a_prediction_that_holds_reports_nothing_lost(tiny: TinyPair) -> None:
    engine, _ = warm(tiny)
    engine.add_request(request("b", [*PREFIX, 4, 5], greedy(2), predicted_cached_tokens=24))
    usage = finish(engine, "b")
    assert (usage.cached_tokens, usage.evicted_predicted_tokens) == (24, 0)


def test_the_load_reports_tier_states_and_evictions(tiny: TinyPair) -> None:
    clock = ManualClock()
    engine = engine_for(tiny.ours, gpu_blocks=8, cpu_blocks=8, clock=clock)
    run_to_completion(engine, [request("a", random_ids(17, seed=1), greedy(2))])
    load = engine.load()
    # a's 17 prompt tokens and 1 computed output token fill 4 blocks and part of a 5th: 4 stay cached
    assert (load.gpu_blocks_free, load.gpu_blocks_cached, load.cpu_blocks_free) == (8, 4, 8)
    run_to_completion(engine, [request("b", random_ids(17, seed=2), greedy(2))])
    load = engine.load()
    # b takes the 4 empty blocks and 1 of a's (offloaded: the CPU tier now holds it): 3 + 4 cached
    assert (load.gpu_blocks_cached, load.offloaded_blocks, load.cpu_blocks_free) == (7, 1, 7)
    assert (load.evicted_ttl_blocks, load.evicted_pressure_blocks) == (0, 0)
    clock.advance(TTL_S + 1)
    engine.step()  # every block expires, in both tiers
    load = engine.load()
    assert (load.gpu_blocks_free, load.gpu_blocks_cached, load.cpu_blocks_free) == (8, 0, 8)
    assert (load.evicted_ttl_blocks, load.evicted_pressure_blocks, load.offloaded_blocks) == (8, 0, 1)
