"""Rejected requests leak nothing: the real gateway over HTTP in front of a real worker (the tiny model).

The gateway's context window (4096) is wider than the worker's (512), so some prompts pass the gateway
and are refused by the worker itself (INVALID_ARGUMENT, a 400 to the client); the rest are refused by
the gateway before any dispatch. Either way, once the burst is answered the worker's free GPU block
count equals what it was before, nothing is left in flight, and good requests sent alongside succeed.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from kvgate.common.clock import SystemClock
from kvgate.common.tokenizer import load_tokenizer
from kvgate.gateway.compose import build_gateway
from kvgate.gateway.settings import GatewaySettings, Limits
from kvgate.index import IndexSettings, MemoryPrefixIndex
from kvgate.index.event_feed import EventFeed
from kvgate.workers.engine import LLMEngine
from kvgate.workers.service import WorkerServer
from tests.support.http_server import serve
from tests.support.real_workers import StartWorker
from tests.workers.service.helpers import CACHE, MAX_MODEL_LEN, engine_is_idle, engine_loop, eventually

MODEL = "tiny"
LIMITS = Limits(context_window=4096, max_output_tokens=32, request_timeout_s=30)
GOOD = {"model": MODEL, "messages": [{"role": "user", "content": "Say something."}], "max_tokens": 8}


@dataclass
class Stack:
    url: str
    worker: WorkerServer


@pytest.fixture
async def stack(start_worker: StartWorker, tiny_chat_model: Path) -> AsyncIterator[Stack]:
    index = MemoryPrefixIndex(IndexSettings(), SystemClock())
    worker = await start_worker()
    feed = EventFeed(index, poll_s=0.2, secret=CACHE.secret)
    feed.follow(worker.info.address)
    gateway = build_gateway(
        GatewaySettings(MODEL, CACHE, limits=LIMITS), index, load_tokenizer(tiny_chat_model), refresh_s=0.1
    )
    async with serve(gateway.app) as url:
        await eventually(lambda: gateway.dispatcher.routable_count() == 1)
        yield Stack(url, worker)
    await feed.close()


def free_blocks(engine: LLMEngine) -> int:
    """GPU blocks not held by a sequence (empty, or cached and evictable)."""
    return engine.kv.gpu_pool.num_free


def chat(**changes: object) -> bytes:
    return json.dumps(GOOD | changes).encode()


def json_schema(schema: dict) -> dict:
    return {"type": "json_schema", "json_schema": {"name": "n", "schema": schema}}


CHAT, COMPLETIONS = "/v1/chat/completions", "/v1/completions"
UNSATISFIABLE = {"type": "integer", "minimum": 2, "maximum": 1}
LONG = [{"role": "user", "content": "x" * (MAX_MODEL_LEN + 100)}]  # one byte token per character
BAD = [
    (CHAT, chat(messages=LONG)),  # passes the gateway; the worker refuses it
    (COMPLETIONS, json.dumps({"model": MODEL, "prompt": list(range(40)) * 20, "max_tokens": 4}).encode()),
    (CHAT, chat(max_tokens=10**30)),
    (CHAT, chat(max_tokens=-1)),
    (CHAT, chat(stop=["a"] * 9)),
    (CHAT, chat(messages=[{"role": "user", "content": "x"}] * 3000)),
    (CHAT, chat(model="nope")),
    (CHAT, chat()[:-1] + b', "temperature": NaN}'),
    (CHAT, chat()[:-1] + b', "user": "\\ud800"}'),
    (CHAT, b'{"model": "tiny", "messages": [{"role": "user", "content": "\xff"}]}'),
    (CHAT, b"[" * 50_000),
    (CHAT, chat(bogus=True)),
    (CHAT, chat(response_format=json_schema({"not": {}}))),  # the gateway refuses what cannot compile
    (CHAT, chat(response_format=json_schema({"type": "object", "properties": {"a": {"pattern": "(?<=a)"}}}))),
    (COMPLETIONS, json.dumps({"model": MODEL, "prompt": "x", "guided_json": UNSATISFIABLE}).encode()),
]


async def test_rejected_requests_leave_every_block_free_and_the_worker_serving(stack: Stack) -> None:
    loop = engine_loop(stack.worker)
    before = await loop.call(free_blocks)
    async with httpx.AsyncClient(base_url=stack.url, timeout=30) as http:

        async def send(path: str, body: bytes) -> httpx.Response:
            return await http.post(path, content=body, headers={"content-type": "application/json"})

        replies = await asyncio.gather(*(send(*bad) for bad in BAD), *(send(CHAT, chat()) for _ in range(3)))
        await eventually(lambda: loop.call(engine_is_idle))
        after = await loop.call(free_blocks)
        again = await send(CHAT, chat(max_tokens=4))
    bad, good = replies[: len(BAD)], replies[len(BAD) :]
    assert [r.status_code // 100 for r in bad] == [4] * len(BAD), [r.text for r in bad]
    assert all(set(r.json()["error"]) == {"message", "type", "param", "code"} for r in bad)
    assert all("at most 512 tokens" in r.json()["error"]["message"] for r in bad[:2])  # the worker's own
    assert [r.status_code for r in good] == [200] * 3
    assert after == before
    assert loop.in_flight == 0
    assert again.status_code == 200
