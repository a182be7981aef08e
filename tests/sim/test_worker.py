"""A simulated worker's bookkeeping: FIFO prefills, numbered event batches, heartbeat load figures."""

from __future__ import annotations

import pytest

from kvgate.gateway.routing import RouteDecision, RouteReason
from kvgate.proto.events import EventKind
from kvgate.proto.ids import WorkerId
from kvgate.sim import SimSettings
from kvgate.sim.timing import TimeModel
from kvgate.sim.worker import SimJob, SimWorker
from tests.sim.helpers import BLOCK, req, workload

SETTINGS = SimSettings(capacity_tokens=64 * BLOCK)
W = WorkerId("w0")


def job(i: int, ids: list[int]) -> SimJob:
    wl = workload(req(0, ids, output=10))
    request = wl.requests[0]
    decision = RouteDecision(W, RouteReason.LOAD_BALANCED, 0)
    return SimJob(i, 0.0, request.input_length, request.output_length, wl.hashes[0], decision)


def test_prefills_run_one_at_a_time_and_publish_numbered_batches() -> None:
    worker = SimWorker(W, SETTINGS, TimeModel.of(SETTINGS))
    worker.enqueue(job(0, [1, 2]), now_ms=0)
    worker.enqueue(job(1, [1, 2, 3]), now_ms=0)
    end = worker.start_next(0.0, 0)
    assert end == pytest.approx(2 * BLOCK / SETTINGS.prefill_tokens_per_s + SETTINGS.decode_step_s)
    assert worker.start_next(0.0, 0) is None  # busy
    load = worker.load(0.0)
    assert (load.waiting_seqs, load.running_seqs) == (1, 1)
    # the running prefill's, then the queued one's own block (the first two are computed before it)
    assert load.waiting_prefill_tokens == 2 * BLOCK + 1 * BLOCK
    first, batch = worker.finish_prefill(now_ms=110)
    assert (first.index, batch.seq, len(batch.events)) == (0, 1, 8)
    assert {e.kind for e in batch.events} == {EventKind.STORED}
    worker.start_next(0.11, 110)
    second, batch = worker.finish_prefill(now_ms=300)
    assert (second.cached_tokens, second.computed_tokens, batch.seq) == (2 * BLOCK, BLOCK, 2)
    assert worker.computed_tokens == 3 * BLOCK
    assert worker.load(0.3).running_seqs == 2  # both decoding
    worker.finish_decode(first)
    assert worker.load(0.3).running_seqs == 1


def test_kv_in_use_counts_active_sequences_in_blocks() -> None:
    worker = SimWorker(W, SETTINGS, TimeModel.of(SETTINGS))
    worker.enqueue(job(0, [1]), now_ms=0)
    worker.start_next(0.0, 0)
    load = worker.load(0.0)
    assert load.gpu_blocks_total == 64 * BLOCK // 16
    assert load.gpu_blocks_total - load.gpu_blocks_free == BLOCK // 16


def test_the_heartbeat_reports_cached_blocks_and_evictions_as_the_engine_does() -> None:
    worker = SimWorker(W, SETTINGS, TimeModel.of(SETTINGS))
    worker.enqueue(job(0, [1, 2]), now_ms=0)
    worker.start_next(0.0, 0)
    done, _ = worker.finish_prefill(now_ms=110)
    worker.finish_decode(done)
    load = worker.load(0.2)
    # nothing runs: every block is free, and the prompt's two blocks of KV are cached in them
    assert load.gpu_blocks_free == load.gpu_blocks_total
    assert load.gpu_blocks_cached == 2 * BLOCK // 16
    assert (load.evicted_pressure_blocks, load.evicted_ttl_blocks) == (0, 0)
    # a prompt of the whole cache's size pushes the unexpired first one out
    worker.enqueue(job(1, list(range(10, 74))), now_ms=200)
    worker.start_next(0.2, 200)
    big, _ = worker.finish_prefill(now_ms=4000)
    load = worker.load(4.0)
    assert load.evicted_pressure_blocks == 2 * BLOCK // 16
    worker.finish_decode(big)
    load = worker.load(4.1)  # nothing runs, and every block holds a cached chunk: the cache is full
    assert load.gpu_blocks_free == load.gpu_blocks_total == load.gpu_blocks_cached
