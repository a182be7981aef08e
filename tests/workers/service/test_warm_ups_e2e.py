"""Warm-ups end to end, embedded mode: the real gateway (HTTP, the ``openai`` SDK) in front of two real
workers with warm-ups on. Once chats that open with one system prompt have been seen, the gateway asks
the worker that does not hold it to prefill it at background priority; that worker then holds it
(its events reach the index) and the next chat there reuses it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path

import openai
import pytest

from kvgate.common.clock import SystemClock
from kvgate.common.tokenizer import load_tokenizer
from kvgate.gateway.compose import Gateway, build_gateway
from kvgate.gateway.routing.config import RoutingConfig
from kvgate.gateway.settings import GatewaySettings
from kvgate.index import IndexSettings, MemoryPrefixIndex
from kvgate.index.event_feed import EventFeed
from kvgate.proto.ids import WorkerId
from kvgate.workers.service import WorkerServer
from tests.support.http_server import serve
from tests.workers.service.helpers import CACHE, eventually, hashes_of, worker_config
from tests.workers.service.test_end_to_end import LIMITS, MODEL, _holds, chat

# any demand asks for another holder; every worker counts as idle; the system prompt's 2 chunks qualify
WARM = RoutingConfig(warm_demand=0.01, warm_idle_s=100.0, warm_min_tokens=256)


def question(n: int) -> str:
    """A question that takes the prompt past the system prompt's chunks into one more (the context
    holds 512 tokens)."""
    return f"Question {n}: " + f"what about {n}? " * 8


@pytest.fixture
async def warm_stack(
    tiny_chat_model: Path,
) -> AsyncIterator[tuple[openai.AsyncOpenAI, Gateway, MemoryPrefixIndex]]:
    index = MemoryPrefixIndex(IndexSettings(), SystemClock())
    feed = EventFeed(index, poll_s=0.2, secret=CACHE.secret)
    servers = []
    for i in range(2):  # GPU tiers of 16k tokens: the system prompt is a small share of one
        config = worker_config(tiny_chat_model, worker_id=f"worker-{i}")
        server = WorkerServer(None)
        await server.start(replace(config, engine=replace(config.engine, num_gpu_blocks=1024)))
        servers.append(server)
        feed.follow(server.info.address)
    tokenizer = load_tokenizer(tiny_chat_model)
    settings = GatewaySettings(MODEL, CACHE, limits=LIMITS, routing=WARM)
    gateway = build_gateway(settings, index, tokenizer, refresh_s=0.1)
    try:
        async with serve(gateway.app) as url:
            await eventually(lambda: gateway.dispatcher.routable_count() == 2)
            async with openai.AsyncOpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0) as client:
                yield client, gateway, index
    finally:
        await feed.close()
        for server in servers:
            await server.stop()


async def test_the_other_worker_is_warmed_up_with_the_shared_system_prompt(
    warm_stack: tuple[openai.AsyncOpenAI, Gateway, MemoryPrefixIndex], tiny_chat_model: Path
) -> None:
    client, gateway, index = warm_stack
    tokenizer = load_tokenizer(tiny_chat_model)
    text = tokenizer.apply_chat_template(chat(question(0)))
    opening = hashes_of(tokenizer.encode(text, add_special_tokens=False).tolist())[:2]
    first = await client.chat.completions.create(model=MODEL, messages=chat(question(0)), max_tokens=2)
    home = WorkerId(first.model_extra["kvgate"]["worker"])
    other = WorkerId("worker-1" if home == "worker-0" else "worker-0")
    await eventually(lambda: _holds(index, opening, home))
    assert not await _holds(index, opening, other)
    for n in (1, 2):  # the prompts part after the system prompt: it is their shared opening
        await client.chat.completions.create(model=MODEL, messages=chat(question(n)), max_tokens=2)
    await eventually(lambda: gateway.metrics.warm_ups.labels("done")._value.get() >= 1)
    await eventually(lambda: _holds(index, opening, other), timeout_s=20.0)
