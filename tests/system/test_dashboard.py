"""The live dashboard in a real browser (Debian's Chromium driven by Playwright): every chart renders
with data from real traffic, and a screenshot is taken (KVGATE_DASHBOARD_SCREENSHOT=path keeps it).

The scripted workers have no KV tiers of their own, so the test heartbeats tier usage and eviction
counts for them, as real workers do with every heartbeat."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from kvgate.common.tokenizer import Tokenizer
from kvgate.gateway.diagnosis import Cause, DiagnosisSettings
from kvgate.proto.workers import WorkerLoad
from tests.gateway.test_openai_api import chat
from tests.support.live_gateway import MODEL, LiveGateway, running_gateway

CHARTS = {
    "chart-hit",
    "chart-workers",
    "chart-predicted",
    "chart-mispredicted",
    "chart-misses",
    "chart-gpu",
    "chart-cpu",
    "chart-evictions",
    "chart-reasons",
    "chart-ttft",
}
FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def chromium() -> str:
    path = shutil.which("chromium")
    if path is None:
        if os.environ.get("CI"):
            pytest.fail("chromium is required in CI (apt-get install -y chromium)")
        pytest.skip("chromium is not installed (apt-get install -y chromium)")
    return path


async def traffic(live: LiveGateway) -> None:
    """A repeated prompt (a hit), a new one, then the repeated one again after its worker lost its
    cache without telling the index (a stale-index misprediction)."""
    async with httpx.AsyncClient(base_url=live.url) as http:
        for question in ("same", "same", "other", "same"):
            body = {"model": MODEL, "messages": chat(question), "max_tokens": 3}
            reply = await http.post("/v1/chat/completions", json=body)
            assert reply.status_code == 200
            if question == "other":
                for worker in live.workers:
                    worker.held.clear()


def load_at(tick: int, worker: int) -> WorkerLoad:
    """A worker filling its tiers and evicting more and more, step by step."""
    used, cached = min(40 + 7 * tick + 20 * worker, 200), min(60 + 11 * tick, 300 - 40)
    return WorkerLoad(
        running_seqs=2 + worker,
        gpu_blocks_total=512,
        gpu_blocks_free=512 - used,
        gpu_blocks_cached=cached,
        cpu_blocks_total=2048,
        cpu_blocks_free=2048 - min(100 + 90 * tick * (worker + 1), 2000),
        evicted_ttl_blocks=3 * tick * tick,
        evicted_pressure_blocks=max(0, tick - 2) * 25 * (worker + 1),
        offloaded_blocks=40 * tick,
    )


@contextlib.asynccontextmanager
async def heartbeats(live: LiveGateway) -> AsyncIterator[None]:
    async def beat() -> None:
        for tick in range(1000):
            for i, worker in enumerate(live.workers):
                await live.index.heartbeat(worker.worker_id, worker.epoch, load_at(tick, i))
            await asyncio.sleep(0.4)

    task = asyncio.create_task(beat())
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


@contextlib.asynccontextmanager
async def dashboard(live: LiveGateway, points: int, errors: list[str]) -> AsyncIterator[Any]:
    """The live dashboard in headless Chromium once it has drawn ``points`` polls; the page's script
    errors are appended to ``errors``."""
    browser_path = chromium()
    try:
        from playwright.async_api import async_playwright
    except ImportError:
        if os.environ.get("CI"):
            raise
        pytest.skip("playwright is not installed (the dev extra)")
    async with async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=browser_path, headless=True, args=FLAGS)
        page = await browser.new_page(viewport={"width": 1280, "height": 1100})
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        await page.goto(f"{live.url}/dashboard")
        await page.wait_for_function(
            f"window.kvgateDashboard && window.kvgateDashboard.points >= {points}", timeout=30_000
        )
        try:
            yield page
        finally:
            await browser.close()


async def test_the_dashboard_draws_every_chart_with_data(live: LiveGateway, tmp_path: Path) -> None:
    await traffic(live)
    errors: list[str] = []
    async with heartbeats(live), dashboard(live, 4, errors) as page:
        filled = await page.evaluate(
            "Object.fromEntries(Object.entries(window.kvgateDashboard.charts).map(([id, c]) =>"
            " [id, c.plot.data.slice(1).map(s => s.filter(v => v != null).length)]))"
        )
        hit = await page.evaluate("window.kvgateDashboard.charts['chart-hit'].plot.data[1].at(-1)")
        labels = await page.evaluate(
            "Object.fromEntries(['chart-mispredicted', 'chart-misses', 'chart-gpu', 'chart-cpu',"
            " 'chart-evictions'].map((id) =>"
            " [id, window.kvgateDashboard.charts[id].plot.series.slice(1).map((s) => s.label)]))"
        )
        misses_note = await page.locator("#misses-now").inner_text()
        missed = (await (await page.request.get(f"{live.url}/dashboard/data")).json())["diagnosis"]["missed"]
        canvases = await page.locator("canvas").count()
        await page.screenshot(path=str(tmp_path / "dashboard.png"), full_page=True)
        if os.environ.get("KVGATE_DASHBOARD_SCREENSHOT"):
            await page.screenshot(path=os.environ["KVGATE_DASHBOARD_SCREENSHOT"], full_page=True)
    assert errors == []
    assert set(filled) == CHARTS
    assert all(filled[chart] and max(filled[chart]) >= 2 for chart in CHARTS), filled
    assert canvases == len(CHARTS)
    assert 0 < hit < 1  # one hit out of four requests: some, not all, tokens cached
    missing = labels.pop("chart-misses")
    assert missing == sorted(c for c, tokens in missed.items() if tokens > 0) != []  # the causes that missed
    assert misses_note.startswith("Since start: ")
    assert all(f"{cause} {int(missed[cause]):,} tokens" in misses_note for cause in missing), misses_note
    assert labels == {
        "chart-mispredicted": ["stale_index"],
        "chart-gpu": ["w0 used", "w0 cached", "w1 used", "w1 cached"],
        "chart-cpu": ["w0 cached", "w1 cached"],
        "chart-evictions": ["ttl", "pressure", "offload"],
    }
    assert (tmp_path / "dashboard.png").stat().st_size > 10_000


async def test_dashboard_assets_are_served_locally_and_nothing_else(live: LiveGateway) -> None:
    async with httpx.AsyncClient(base_url=live.url) as http:
        page = await http.get("/dashboard")
        script = await http.get("/dashboard/static/vendor/uplot/uPlot.iife.min.js")
        escape = await http.get("/dashboard/static/../../app.py")
        data = (await http.get("/dashboard/data")).json()
    assert page.status_code == 200
    assert "http" not in page.text.replace("http-equiv", "")  # no CDN: every asset is ours
    assert script.status_code == 200
    assert script.headers["content-type"].startswith("text/javascript")
    assert escape.status_code == 404
    assert {w["worker"] for w in data["workers"]} == {"w0", "w1"}


async def test_the_missed_tokens_panel_says_why_it_is_empty(tokenizer: Tokenizer) -> None:
    errors: list[str] = []
    async with running_gateway(tokenizer) as live, dashboard(live, 2, errors) as page:
        idle = await page.locator("#misses-now").inner_text()
    async with running_gateway(tokenizer, diagnosis=DiagnosisSettings(enabled=False)) as live:
        await traffic(live)
        async with dashboard(live, 2, errors) as page:
            off = await page.locator("#misses-now").inner_text()
            series = await page.evaluate("window.kvgateDashboard.charts['chart-misses'].plot.series.length")
    assert errors == []
    assert idle.startswith("No missed tokens diagnosed yet")
    assert off.startswith("Cache-miss diagnosis is off")
    assert series == 1  # the time axis alone: no cause is drawn


async def test_dashboard_data_counts_missed_tokens_by_diagnosed_cause(live: LiveGateway) -> None:
    await traffic(live)
    async with httpx.AsyncClient(base_url=live.url) as http:
        page = (await http.get("/dashboard")).text
        data = (await http.get("/dashboard/data")).json()
        exposition = (await http.get("/metrics")).text
    assert '<div class="chart" id="chart-misses">' in page
    assert '<p class="note" id="misses-now">' in page
    assert data["diagnosis"]["enabled"] is True
    missed = data["diagnosis"]["missed"]
    assert set(missed) == {cause.value for cause in Cause}
    assert sum(missed.values()) > 0
    for cause, tokens in missed.items():
        assert f'kvgate_cache_miss_tokens_total{{cause="{cause}"}} {float(tokens)}' in exposition


async def test_dashboard_data_says_when_diagnosis_is_off(tokenizer: Tokenizer) -> None:
    async with running_gateway(tokenizer, diagnosis=DiagnosisSettings(enabled=False)) as live:
        await traffic(live)
        async with httpx.AsyncClient(base_url=live.url) as http:
            data = (await http.get("/dashboard/data")).json()
    assert data["diagnosis"]["enabled"] is False
    assert set(data["diagnosis"]["missed"].values()) == {0.0}
