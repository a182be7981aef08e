"""Warm-ups in the simulator: the router's copies of a hot opening run on the worker as background
pieces that every other job overtakes, unless the job starts with them (then it waits and reuses
them); a hot opening spreads over two workers without any request computing it twice."""

from __future__ import annotations

from dataclasses import replace

from kvgate.gateway.routing.config import RoutingConfig
from kvgate.sim import SimSettings
from kvgate.sim.timing import TimeModel
from kvgate.sim.worker import SimJob, SimWorker
from tests.sim.helpers import BLOCK, replay, req
from tests.sim.test_worker import SETTINGS, W, job

OPENING = list(range(1, 9))  # 8 blocks: 4,096 tokens


def piece(i: int, ids: list[int]) -> SimJob:
    return replace(job(i, ids), output_tokens=0, background=True, warm_up=True)


def test_a_request_overtakes_a_warm_up_unless_it_starts_with_it() -> None:
    worker = SimWorker(W, SETTINGS, TimeModel.of(SETTINGS))
    worker.enqueue(piece(-1, [1, 2]), now_ms=0)
    worker.enqueue(piece(-2, [1, 2, 3, 4]), now_ms=0)
    assert worker.load(0.0).waiting_prefill_tokens == 0  # the engine reports no warm-up
    worker.enqueue(job(0, [50, 51]), now_ms=0)  # shares nothing: goes first
    worker.start_next(0.0, 0)
    assert worker.current is not None
    assert worker.current.index == 0
    worker.finish_prefill(now_ms=100)
    worker.enqueue(job(1, [1, 2, 3, 4, 9]), now_ms=100)  # starts with both pieces: they go before it
    order = []
    for t in (100, 200, 300):
        worker.start_next(t / 1000, t)
        assert worker.current is not None
        order.append(worker.current.index)
        worker.finish_prefill(now_ms=t + 50)
    assert order == [-1, -2, 1]
    assert worker.computed_tokens == 2 * BLOCK + 4 * BLOCK + BLOCK  # the opening computed once


def test_a_hot_opening_spreads_over_two_workers_and_no_request_computes_it_twice() -> None:
    requests = [req(0.25 * i, [*OPENING, 100 + i]) for i in range(40)]
    settings = SimSettings(workers=2, capacity_tokens=10_000_000)
    computing = RoutingConfig(kv_fetch_min_tokens=0)  # no KV sources: a moved request computes
    alone, records = replay("kvgate", requests, settings, replace(computing, warm_demand=0.0))
    assert {r.worker for r in records} == {0}  # without warm-ups every request reuses the one holder
    assert alone.imbalance == 2.0
    warmed, records = replay("kvgate", requests, settings, replace(computing, warm_demand=1.0))
    assert {r.worker for r in records} == {0, 1}
    assert all(r.cached_tokens == len(OPENING) * BLOCK for r in records[1:])  # nobody recomputed it
    assert warmed.imbalance < 1.1
    assert warmed.hit_rate == alone.hit_rate
    # with KV sources a request moved off the busy holder fetches the opening: it spreads too, once
    fetched, records = replay("kvgate", requests, settings, RoutingConfig(warm_demand=0.0))
    assert {r.worker for r in records} == {0, 1}
    assert all(r.cached_tokens == len(OPENING) * BLOCK for r in records[1:])
    assert sum(r.fetched_tokens > 0 for r in records) == 1
    assert fetched.hit_rate == alone.hit_rate


def test_the_report_counts_the_warm_up_tokens() -> None:
    requests = [req(0.25 * i, [*OPENING, 100 + i]) for i in range(10)]
    settings = SimSettings(workers=2, capacity_tokens=10_000_000)
    warmed, _ = replay("kvgate", requests, settings, RoutingConfig(warm_demand=1.0))
    assert warmed.warm_up_tokens == len(OPENING) * BLOCK  # one copy, onto the second worker
    assert sum(warmed.worker_prefill_tokens) == 10 * BLOCK + 2 * len(OPENING) * BLOCK
    assert replay("kvgate", requests, settings, RoutingConfig(warm_demand=0.0))[0].warm_up_tokens == 0
