"""``kvgate top``: the screen computed from a live gateway's /metrics after known traffic."""

from __future__ import annotations

import asyncio
import sys

import httpx

from kvgate.cli.top_view import Snapshot, parse, quantile, render
from tests.gateway.conftest import MODEL, LiveGateway
from tests.gateway.test_openai_api import chat


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
    assert snap.reasons == {"load_balanced": 1, "cache_hit": 1}
    screen = render(snap, None, live.url)
    assert f"{cached / (2 * prompt):.1%}" in screen

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


def test_ttft_quantiles_come_from_the_buckets() -> None:
    buckets = {0.1: 10.0, 0.5: 90.0, 1.0: 99.0, float("inf"): 100.0}
    assert quantile(buckets, 0.5) == 0.5
    assert quantile(buckets, 0.99) == 1.0
    assert quantile({}, 0.5) is None
