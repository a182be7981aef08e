"""``kvgate top``: the screen computed from a live gateway's /metrics after known traffic."""

from __future__ import annotations

import asyncio
import sys

import httpx

from kvgate.cli.top_view import Snapshot, parse, quantile, render
from kvgate.proto.workers import WorkerLoad
from tests.gateway.test_openai_api import chat
from tests.support.live_gateway import MODEL, LiveGateway


async def test_top_shows_the_hit_rate_of_a_repeated_prompt(live: LiveGateway) -> None:
    body = {"model": MODEL, "messages": chat("Repeat me."), "max_tokens": 2}
    async with httpx.AsyncClient(base_url=live.url) as http:
        await http.post("/v1/chat/completions", json=body)
        second = (await http.post("/v1/chat/completions", json=body)).json()
        text = (await http.get("/metrics")).text
    snap = parse(text)
    worker = second["kvgate"]["worker"]
    cached = second["usage"]["prompt_tokens_details"]["cached_tokens"]
    prompt = second["usage"]["prompt_tokens"]
    assert snap.prompt[worker] == 2 * prompt
    assert snap.cached[worker] == cached
    assert snap.reasons == {"new_prefix": 1, "cache_hit": 1}
    screen = render(snap, None, live.url)
    assert f"{cached / (2 * prompt):.1%}" in screen
    first_missed = snap.cache_misses["new_prefix"]  # the first request's reusable tokens, none reused
    assert first_missed > 0
    assert f"miss causes  new_prefix {first_missed:.0f}" in screen

    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "kvgate.cli.main",
        "top",
        "--url",
        live.url,
        "--once",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, _ = await proc.communicate()
    assert proc.returncode == 0
    assert worker in out.decode()
    assert "(all)" in out.decode()


def test_recent_hit_rate_is_over_the_interval_only() -> None:
    before = Snapshot()
    before.prompt["w"], before.cached["w"] = 1000.0, 0.0
    now = Snapshot()
    now.prompt["w"], now.cached["w"] = 2000.0, 1000.0
    row = next(line for line in render(now, before, "u").splitlines() if line.startswith("w "))
    assert row.split()[-2:] == ["50.0%", "100.0%"]  # since start, over the last interval


async def test_top_shows_each_workers_tiers_and_evictions(live: LiveGateway) -> None:
    w0 = live.workers[0]
    load = WorkerLoad(
        gpu_blocks_total=100,
        gpu_blocks_free=70,
        gpu_blocks_cached=50,
        cpu_blocks_total=400,
        cpu_blocks_free=300,
        evicted_ttl_blocks=7,
        evicted_pressure_blocks=11,
        offloaded_blocks=13,
    )
    assert await live.index.heartbeat(w0.worker_id, w0.epoch, load)
    await live.gateway.directory.refresh()
    snap = parse(await _metrics(live.url))
    assert snap.blocks["w0"] == {
        ("gpu", "used"): 30,
        ("gpu", "cached"): 50,
        ("gpu", "free"): 20,
        ("cpu", "cached"): 100,
        ("cpu", "free"): 300,
    }
    assert _tier_row(render(snap, None, "u"), "w0") == ["w0", "30%", "50%", "20%", "25%", "7", "11", "13"]
    later = parse(await _metrics(live.url))
    later.evicted["w0"] = {"ttl": 10, "pressure": 11, "offload": 3}  # offloads restarted: a new epoch
    assert _tier_row(render(later, snap, "u"), "w0")[-3:] == ["3", "0", "3"]  # over the interval


def _tier_row(screen: str, worker: str) -> list[str]:
    return next(line.split() for line in screen.splitlines() if line.startswith(f"{worker} ") and "%" in line)


async def _metrics(url: str) -> str:
    async with httpx.AsyncClient(base_url=url) as http:
        return (await http.get("/metrics")).text


def test_ttft_quantiles_come_from_the_buckets() -> None:
    buckets = {0.1: 10.0, 0.5: 90.0, 1.0: 99.0, float("inf"): 100.0}
    assert quantile(buckets, 0.5) == 0.5
    assert quantile(buckets, 0.99) == 1.0
    assert quantile({}, 0.5) is None
