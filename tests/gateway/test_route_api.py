"""``POST /v1/route``: the dry-run view of a routing decision."""

from __future__ import annotations

import httpx

from tests.gateway.test_openai_api import chat
from tests.support.live_gateway import MODEL, LiveGateway


async def test_route_explains_a_cache_hit_without_recording_anything(live: LiveGateway) -> None:
    body = {"model": MODEL, "messages": chat("Where does this go?"), "max_tokens": 3}
    async with httpx.AsyncClient(base_url=live.url) as http:
        cold = (await http.post("/v1/route", json=body)).json()
        again = (await http.post("/v1/route", json=body)).json()
        await http.post("/v1/chat/completions", json=body)
        warm = (await http.post("/v1/route", json=body)).json()

    assert cold["matches"] == []
    assert again["matches"] == []  # a dry run leaves no pending entries
    assert cold["reason"] == "new_prefix"
    assert cold["full_chunks"] == cold["prompt_tokens"] // 128
    assert warm["reason"] == "cache_hit"
    best = warm["matches"][0]
    assert best["worker"] == warm["chosen_worker"]
    assert best["matched_chunks"] == best["gpu_chunks"] == warm["full_chunks"]
    assert warm["predicted_cached_tokens"] == warm["full_chunks"] * 128


async def test_route_accepts_completion_bodies_and_rejects_bad_ones(live: LiveGateway) -> None:
    async with httpx.AsyncClient(base_url=live.url) as http:
        ok = await http.post("/v1/route", json={"model": MODEL, "prompt": "hello " * 300})
        bad = await http.post("/v1/route", json={"model": MODEL, "prompt": "x", "temperature": "hot"})
        unknown = await http.post("/v1/route", json={"model": "nope", "prompt": "x"})
    assert ok.status_code == 200
    assert ok.json()["full_chunks"] >= 2
    assert bad.status_code == 400
    assert bad.json()["error"]["param"] == "temperature"
    assert unknown.status_code == 404


async def test_the_dry_run_is_inside_the_in_flight_bound(live: LiveGateway) -> None:
    """It tokenizes and looks the index up as a generation does, so it takes a slot like one."""
    gate, taken = live.gateway.gate, 0
    while gate.try_enter():  # every slot taken
        taken += 1
    body = {"model": MODEL, "prompt": "hello"}
    async with httpx.AsyncClient(base_url=live.url) as http:
        full = await http.post("/v1/route", json=body)
        for _ in range(taken):
            gate.leave()
        free = await http.post("/v1/route", json=body)
    assert full.status_code == 503
    assert full.json()["error"]["code"] == "overloaded"
    assert free.status_code == 200
