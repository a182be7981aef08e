"""Overload with real processes: ``kvgate gateway`` over scripted workers in their own process and a
real Redis, driven open-loop at a quarter and then twice the workers' sustainable rate (bench/overload.py,
shortened). Every request gets an answer; past capacity the answers are refusals with Retry-After,
given long before any deadline; capacity comes back in full; the gateway's memory stays flat."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from tests.common.tokenizer.default_model import smollm2_gguf
from tests.support.redis_server import RedisServer

pytestmark = [pytest.mark.slow, pytest.mark.redis]
BENCH = Path(__file__).resolve().parents[2] / "bench" / "overload.py"


def _bench():
    spec = importlib.util.spec_from_file_location("kvgate_bench_overload", BENCH)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_past_capacity_the_gateway_refuses_fast_loses_nothing_recovers(private_redis: RedisServer) -> None:
    smollm2_gguf()  # the gateway tokenizes with the default model
    bench = _bench()
    # Requests of 0.4 s offered at a quarter of the capacity: Poisson bursts past the 8 slots stay rare
    # even when a busy machine adds a few hundred ms to each request (then some are refused, rightly).
    setup = bench.Setup(seconds=4.0, token_delay_s=0.05, under=0.25, over=2.0)
    report = bench.run(setup, redis_url=private_redis.url)
    under, double = report["phases"]["under"], report["phases"]["over"]
    assert under["lost"] == double["lost"] == 0  # every request answered: 200, 429 or 503
    assert under["statuses"].get("200", 0) >= 0.9 * under["requests"]  # under capacity: served
    refused = double["statuses"].get("429", 0) + double["statuses"].get("503", 0)
    assert refused > 0  # twice the capacity was really offered...
    assert double["statuses"].get("200", 0) > 0  # ...and the workers kept serving
    assert double["refused_with_retry_after"] == refused
    assert double["refused_p99_s"] < 5.0  # refused at once, not queued toward the 600 s deadline
    assert report["recovery_statuses"] == {200: 2 * setup.workers * setup.slots}  # no leaked slot
    rss = report["gateway_rss_mb"]
    assert rss["last"] - rss["first"] < 100, rss
