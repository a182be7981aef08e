"""The worker's Prometheus exporter, scraped over HTTP after known traffic."""

from __future__ import annotations

import httpx
from prometheus_client.parser import text_string_to_metric_families

from tests.support.real_workers import StartWorker
from tests.workers.service.helpers import client, generate_request, prompt, read_generation


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


async def test_a_repeated_prompt_shows_up_in_the_worker_metrics(start_worker: StartWorker) -> None:
    server = await start_worker(metrics_port=0)
    ids = prompt(200, seed=3)  # 12 full blocks of 16
    async with client(server.info.address) as stub:
        first = await read_generation(stub.Generate(generate_request(ids, "a")))
        second = await read_generation(stub.Generate(generate_request(ids, "b")))
    assert server.info.metrics_address.endswith(f":{server.metrics.port}")
    async with httpx.AsyncClient() as http:
        text = (await http.get(f"http://{server.info.metrics_address}/metrics")).text
    got = samples(text)
    w = (("worker", "worker-0"),)

    assert second.usage.cached_gpu_tokens > 0
    assert got[("kvgate_worker_prompt_tokens_total", w)] == 2 * len(ids)
    assert got[("kvgate_worker_cached_tokens_total", (("tier", "gpu"), *w))] == second.usage.cached_gpu_tokens
    completion = len(first.tokens) + len(second.tokens)
    assert got[("kvgate_worker_completion_tokens_total", w)] == completion
    assert got[("kvgate_worker_requests_finished_total", (("reason", "length"), *w))] == 2
    used, free = (
        got[("kvgate_worker_blocks", (("state", s), ("tier", "gpu"), *w))] for s in ("used", "free")
    )
    assert used + free == server.engine.load().gpu_blocks_total
    assert got[("kvgate_worker_blocks", (("state", "cached"), ("tier", "gpu"), *w))] >= 12
    assert got[("kvgate_worker_running_seqs", w)] == 0
    assert got[("kvgate_worker_evictions_total", (("cause", "pressure"), *w))] == 0


async def test_no_exporter_unless_asked(start_worker: StartWorker) -> None:
    server = await start_worker()
    assert server.metrics is None
    assert server.info.metrics_address == ""
