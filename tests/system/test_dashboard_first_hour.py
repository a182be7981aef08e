"""The dashboard as a first-time user meets it (issue 21): legends show the current values without
hovering, an empty panel says why it is empty (the CPU tier is off by default), long TTFTs are
measured rather than pinned to the top bucket, and nothing the page loads is a 404 (the favicon
included). Real gateway over scripted workers; the page in headless Chromium, as in test_dashboard."""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
from collections.abc import AsyncIterator

import httpx

from kvgate.common.tokenizer import Tokenizer
from kvgate.gateway.metrics import bucket_quantile
from kvgate.proto.workers import WorkerLoad
from tests.support.live_gateway import MODEL, LiveGateway, running_gateway
from tests.system.test_dashboard import dashboard, traffic

GPU_ONLY = WorkerLoad(running_seqs=1, gpu_blocks_total=512, gpu_blocks_free=400, gpu_blocks_cached=60)
LEGEND = "Array.from(document.querySelectorAll('#{} .u-legend .u-series')).slice(1).map((s) => s.innerText)"


@contextlib.asynccontextmanager
async def gpu_only_heartbeats(live: LiveGateway) -> AsyncIterator[None]:
    """The workers report a GPU tier and no CPU tier, as ``kvgate up`` starts them by default."""

    async def beat() -> None:
        while True:
            for worker in live.workers:
                await live.index.heartbeat(worker.worker_id, worker.epoch, GPU_ONLY)
            await asyncio.sleep(0.4)

    task = asyncio.create_task(beat())
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def note(page, chart: str) -> str:  # type: ignore[no-untyped-def]
    found = page.locator(f"#note-{chart}")
    return await found.inner_text() if await found.count() else ""


async def test_legends_show_current_values_and_the_cpu_panel_says_the_tier_is_off(live: LiveGateway) -> None:
    await traffic(live)
    errors: list[str] = []
    failed: list[str] = []
    async with gpu_only_heartbeats(live), dashboard(live, 3, errors) as page:
        page.on("response", lambda r: r.status >= 400 and failed.append(f"{r.status} {r.url}"))
        await page.reload()  # from the start, with the response listener in place
        await page.wait_for_function("window.kvgateDashboard && window.kvgateDashboard.points >= 3")
        hit = await page.evaluate(LEGEND.format("chart-hit"))
        gpu = await page.evaluate(LEGEND.format("chart-gpu"))
        cpu_note, gpu_note = await note(page, "chart-cpu"), await note(page, "chart-gpu")
    assert errors == []
    assert failed == []  # the favicon, every asset and every poll answered
    assert hit[0].startswith("since start"), hit
    assert hit[0].endswith("%"), hit  # not "-" until hovered
    assert hit[1] in ("last interval-", "last interval0.0%")  # nothing prefilled in the last 2 s
    assert gpu, gpu
    assert all(text.endswith("%") for text in gpu), gpu
    assert "off by default" in cpu_note
    assert "--num-cpu-blocks" in cpu_note
    assert gpu_note == ""  # a panel with data has no excuse


async def test_an_idle_gateways_panels_say_why_they_are_empty(tokenizer: Tokenizer) -> None:
    errors: list[str] = []
    async with running_gateway(tokenizer) as live, dashboard(live, 2, errors) as page:
        notes = {chart: await note(page, chart) for chart in ("chart-hit", "chart-ttft", "chart-reasons",
                                                              "chart-mispredicted", "chart-cpu")}  # fmt: skip
    assert errors == []
    assert notes["chart-hit"].startswith("No prompt tokens yet")
    assert notes["chart-ttft"].startswith("No first token yet")
    assert notes["chart-reasons"].startswith("No routing decision yet")
    assert notes["chart-mispredicted"].startswith("No mispredicted tokens")
    assert "off by default" in notes["chart-cpu"]


async def test_favicon_is_served(live: LiveGateway) -> None:
    async with httpx.AsyncClient(base_url=live.url) as http:
        icon = await http.get("/favicon.ico")
        page = (await http.get("/dashboard")).text
    assert icon.status_code == 200
    assert icon.headers["content-type"].startswith("image/svg+xml")
    assert icon.content.startswith(b"<svg")
    assert 'rel="icon"' in page


async def test_ttft_buckets_cover_minutes_and_a_longer_ttft_stays_valid_json(live: LiveGateway) -> None:
    ttft = live.gateway.metrics.ttft.labels(MODEL)
    for seconds in [45.0] * 50 + [200.0] * 49 + [900.0]:  # a CPU's cold prompts, one past every bucket
        ttft.observe(seconds)
    async with httpx.AsyncClient(base_url=live.url) as http:
        exposition = (await http.get("/metrics")).text
        data = await http.get("/dashboard/data")
    assert 'kvgate_time_to_first_token_seconds_bucket{le="300.0",model=' in exposition
    assert data.status_code == 200
    figures = json.loads(data.text, parse_constant=lambda c: math.nan)  # "Infinity" would be a bug
    assert figures["ttft"]["p50"] == 60.0  # 45 s lies in (30, 60]: not pinned at 30
    assert figures["ttft"]["p99"] == 300.0  # 200 s lies in (120, 300]


def test_a_quantile_past_the_top_bucket_is_the_top_finite_bound() -> None:
    buckets = {1.0: 0.0, 300.0: 1.0, math.inf: 10.0}
    assert bucket_quantile(buckets, 0.99) == 300.0
    assert bucket_quantile({1.0: 0.0, math.inf: 0.0}, 0.5) is None
