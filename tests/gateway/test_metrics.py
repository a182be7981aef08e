"""Prometheus metrics after known traffic: every figure checked against what the requests did."""

from __future__ import annotations

import httpx
from prometheus_client.parser import text_string_to_metric_families

from kvgate.gateway.misprediction import CAUSES
from kvgate.proto.workers import WorkerLoad
from tests.gateway.test_openai_api import chat
from tests.support.live_gateway import MODEL, LiveGateway
from tests.support.scripted_worker import Mode


async def scrape(url: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    async with httpx.AsyncClient(base_url=url) as http:
        reply = await http.get("/metrics")
    assert reply.headers["content-type"].startswith("text/plain")
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(reply.text)
        for s in family.samples
    }


def value(samples: dict, name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


async def test_two_identical_long_requests_show_the_hit_on_the_second(live: LiveGateway) -> None:
    body = {"model": MODEL, "messages": chat("Same question."), "max_tokens": 4}
    async with httpx.AsyncClient(base_url=live.url) as http:
        first = (await http.post("/v1/chat/completions", json=body)).json()
        second = (await http.post("/v1/chat/completions", json=body)).json()
    worker = second["kvgate"]["worker"]
    prompt = first["usage"]["prompt_tokens"]
    cached = second["usage"]["prompt_tokens_details"]["cached_tokens"]
    assert cached == (prompt // 128) * 128  # every full chunk of the repeated prompt

    samples = await scrape(live.url)

    policy = {"worker": worker, "policy": "kvgate"}
    assert value(samples, "kvgate_prompt_tokens_total", **policy) == 2 * prompt
    assert value(samples, "kvgate_cached_prompt_tokens_total", **policy, tier="gpu") == cached
    assert value(samples, "kvgate_cached_prompt_tokens_total", **policy, tier="cpu") == 0
    assert value(samples, "kvgate_predicted_cached_tokens_total", worker=worker) == cached
    assert value(samples, "kvgate_route_decisions_total", reason="new_prefix", policy="kvgate") == 1
    assert value(samples, "kvgate_route_decisions_total", reason="cache_hit", policy="kvgate") == 1
    assert value(samples, "kvgate_requests_total", model=MODEL, finish_reason="length") == 2
    assert value(samples, "kvgate_time_to_first_token_seconds_count", model=MODEL) == 2
    assert value(samples, "kvgate_request_duration_seconds_count", model=MODEL) == 2
    assert value(samples, "kvgate_inter_token_latency_seconds_count", model=MODEL) == 2 * 3  # 4 batches each
    assert value(samples, "kvgate_index_lookup_seconds_count") == 2
    assert value(samples, "kvgate_index_degraded") == 0
    for cause in CAUSES:
        assert value(samples, "kvgate_cache_misprediction_tokens_total", cause=cause) == 0


async def test_a_cache_lost_unseen_by_the_index_shows_as_a_stale_index(live: LiveGateway) -> None:
    body = {"model": MODEL, "messages": chat("Same question."), "max_tokens": 2}
    async with httpx.AsyncClient(base_url=live.url) as http:
        first = (await http.post("/v1/chat/completions", json=body)).json()
        for worker in live.workers:
            worker.held.clear()  # e.g. restarted without its events reaching the index
        second = (await http.post("/v1/chat/completions", json=body)).json()
    assert second["kvgate"]["worker"] == first["kvgate"]["worker"]
    predicted = second["kvgate"]["predicted_cached_tokens"]
    assert predicted == (first["usage"]["prompt_tokens"] // 128) * 128 > 0
    assert second["usage"]["prompt_tokens_details"]["cached_tokens"] == 0

    samples = await scrape(live.url)

    assert value(samples, "kvgate_cache_misprediction_tokens_total", cause="stale_index") == predicted
    assert value(samples, "kvgate_cache_misprediction_tokens_total", cause="evicted_since_lookup") == 0


async def test_the_workers_reported_tiers_and_evictions_are_on_the_gateways_metrics(
    live: LiveGateway,
) -> None:
    w0 = live.workers[0]
    load = WorkerLoad(
        running_seqs=3,
        gpu_blocks_total=100,
        gpu_blocks_free=70,
        gpu_blocks_cached=50,
        cpu_blocks_total=400,
        cpu_blocks_free=150,
        evicted_ttl_blocks=7,
        evicted_pressure_blocks=11,
        offloaded_blocks=13,
    )
    assert await live.index.heartbeat(w0.worker_id, w0.epoch, load)
    await live.gateway.directory.refresh()

    samples = await scrape(live.url)

    states = [("gpu", "used"), ("gpu", "cached"), ("gpu", "free"), ("cpu", "cached"), ("cpu", "free")]
    blocks = {
        (tier, state): value(samples, "kvgate_upstream_blocks", worker="w0", tier=tier, state=state)
        for tier, state in states
    }
    assert blocks == {
        ("gpu", "used"): 30,
        ("gpu", "cached"): 50,
        ("gpu", "free"): 20,
        ("cpu", "cached"): 250,
        ("cpu", "free"): 150,
    }
    assert value(samples, "kvgate_upstream_evicted_blocks_total", worker="w0", cause="ttl") == 7
    assert value(samples, "kvgate_upstream_evicted_blocks_total", worker="w0", cause="pressure") == 11
    assert value(samples, "kvgate_upstream_offloaded_blocks_total", worker="w0") == 13
    assert value(samples, "kvgate_upstream_seqs", worker="w0", state="running") == 3
    # w1 registered with an empty GPU pool of 100 blocks and no CPU tier
    assert value(samples, "kvgate_upstream_blocks", worker="w1", tier="gpu", state="free") == 100
    assert ("kvgate_upstream_blocks", (("state", "free"), ("tier", "cpu"), ("worker", "w1"))) not in samples


async def test_failures_are_counted_by_type(live: LiveGateway) -> None:
    for worker in live.workers:
        worker.mode = Mode.BUSY
    async with httpx.AsyncClient(base_url=live.url) as http:
        reply = await http.post(
            "/v1/chat/completions", json={"model": MODEL, "messages": chat("x"), "max_tokens": 2}
        )
    assert reply.status_code == 429
    samples = await scrape(live.url)
    assert value(samples, "kvgate_request_errors_total", type="WorkersBusyError") == 1
    assert value(samples, "kvgate_requests_total", model=MODEL, finish_reason="length") == 0
