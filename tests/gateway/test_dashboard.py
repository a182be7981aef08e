"""The live dashboard in a real browser (Debian's Chromium driven by Playwright): every chart renders
with data from real traffic, and a screenshot is taken (KVGATE_DASHBOARD_SCREENSHOT=path keeps it)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import httpx
import pytest

from tests.gateway.conftest import MODEL, LiveGateway
from tests.gateway.test_openai_api import chat

CHARTS = {"chart-hit", "chart-workers", "chart-predicted", "chart-reasons", "chart-kv", "chart-ttft"}
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


async def traffic(url: str) -> None:
    async with httpx.AsyncClient(base_url=url) as http:
        for question in ("same", "same", "other"):
            body = {"model": MODEL, "messages": chat(question), "max_tokens": 3}
            assert (await http.post("/v1/chat/completions", json=body)).status_code == 200


async def test_the_dashboard_draws_every_chart_with_data(live: LiveGateway, tmp_path: Path) -> None:
    browser_path = chromium()
    try:
        from playwright.async_api import async_playwright
    except ImportError:
        if os.environ.get("CI"):
            raise
        pytest.skip("playwright is not installed (the dev extra)")
    await traffic(live.url)
    async with async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=browser_path, headless=True, args=FLAGS)
        page = await browser.new_page(viewport={"width": 1280, "height": 1100})
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        await page.goto(f"{live.url}/dashboard")
        await page.wait_for_function(
            "window.kvgateDashboard && window.kvgateDashboard.points >= 2", timeout=20_000
        )
        filled = await page.evaluate(
            "Object.fromEntries(Object.entries(window.kvgateDashboard.charts).map(([id, c]) =>"
            " [id, c.plot.data.slice(1).map(s => s.filter(v => v != null).length)]))"
        )
        hit = await page.evaluate("window.kvgateDashboard.charts['chart-hit'].plot.data[1].at(-1)")
        canvases = await page.locator("canvas").count()
        await page.screenshot(path=str(tmp_path / "dashboard.png"), full_page=True)
        if os.environ.get("KVGATE_DASHBOARD_SCREENSHOT"):
            await page.screenshot(path=os.environ["KVGATE_DASHBOARD_SCREENSHOT"], full_page=True)
        await browser.close()
    assert errors == []
    assert set(filled) == CHARTS
    assert all(filled[chart] and max(filled[chart]) >= 2 for chart in CHARTS), filled
    assert canvases == len(CHARTS)
    assert 0 < hit < 1  # one repeated prompt out of three: some, not all, tokens cached
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
