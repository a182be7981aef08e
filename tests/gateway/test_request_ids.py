"""Every HTTP response names its request (``x-request-id``; also ``request-id`` on the Anthropic-style
endpoint), refusals included, and a generation's body carries the same id."""

from __future__ import annotations

import json

import httpx

from tests.support.live_gateway import MODEL, LiveGateway

CHAT = {"model": MODEL, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}


async def test_a_generation_is_named_alike_in_its_headers_and_its_body(live: LiveGateway) -> None:
    async with httpx.AsyncClient(base_url=live.url, timeout=10) as http:
        chat = await http.post("/v1/chat/completions", json=CHAT)
        text = await http.post("/v1/completions", json={"model": MODEL, "prompt": "hi", "max_tokens": 2})
        message = await http.post("/v1/messages", json=CHAT)
    assert chat.json()["id"] == "chatcmpl-" + chat.headers["x-request-id"]
    assert text.json()["id"] == "cmpl-" + text.headers["x-request-id"]
    assert message.json()["id"] == "msg_" + message.headers["x-request-id"]
    assert message.headers["request-id"] == message.headers["x-request-id"]
    ids = {r.headers["x-request-id"] for r in (chat, text, message)}
    assert len(ids) == 3
    assert all(len(i) == 32 and int(i, 16) >= 0 for i in ids)


async def test_a_stream_carries_the_id_of_its_header(live: LiveGateway) -> None:
    async with (
        httpx.AsyncClient(base_url=live.url, timeout=10) as http,
        http.stream("POST", "/v1/chat/completions", json=CHAT | {"stream": True}) as reply,
    ):
        lines = [line async for line in reply.aiter_lines() if line.startswith("data: {")]
    chunk_ids = {json.loads(line.removeprefix("data: "))["id"] for line in lines}
    assert chunk_ids == {"chatcmpl-" + reply.headers["x-request-id"]}


async def test_refusals_and_other_endpoints_are_named_too(live: LiveGateway) -> None:
    async with httpx.AsyncClient(base_url=live.url, timeout=10) as http:
        invalid = await http.post("/v1/chat/completions", json={"model": MODEL})
        unknown = await http.post("/v1/messages", json=CHAT | {"model": "nope"})
        health = await http.get("/health")
    assert invalid.status_code == 400
    assert unknown.status_code == 404
    for reply in (invalid, unknown, health):
        assert len(reply.headers["x-request-id"]) == 32
    assert unknown.headers["request-id"] == unknown.headers["x-request-id"]
