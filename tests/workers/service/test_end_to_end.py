"""End to end, embedded mode: the real gateway (HTTP, the ``openai`` SDK) in front of two real workers,
its in-memory index fed by the event feed. A repeated long prompt goes back to the worker that holds
its prefix, which reports the reused tokens."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import openai
import pytest

from kvgate.common.clock import SystemClock
from kvgate.common.tokenizer import Tokenizer, load_tokenizer
from kvgate.gateway.compose import build_gateway
from kvgate.gateway.settings import GatewaySettings, Limits
from kvgate.index import IndexSettings, MemoryPrefixIndex
from kvgate.index.event_feed import EventFeed
from kvgate.proto.ids import WorkerId
from tests.support.http_server import serve
from tests.support.real_workers import StartWorker
from tests.workers.service.helpers import CACHE, MAX_MODEL_LEN, eventually, hashes_of

MODEL = "tiny"
SYSTEM = "You are a meticulous assistant who answers briefly. " * 6  # ~300 byte tokens: 2 full chunks
LIMITS = Limits(context_window=MAX_MODEL_LEN, max_output_tokens=32, request_timeout_s=30)


@dataclass
class Stack:
    client: openai.AsyncOpenAI
    tokenizer: Tokenizer
    index: MemoryPrefixIndex


def chat(question: str) -> list[dict[str, str]]:
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": question}]


@pytest.fixture
async def stack(start_worker: StartWorker, tiny_chat_model: Path) -> AsyncIterator[Stack]:
    index = MemoryPrefixIndex(IndexSettings(), SystemClock())
    feed = EventFeed(index, poll_s=0.2, secret=CACHE.secret)
    for i in range(2):
        worker = await start_worker(worker_id=f"worker-{i}")
        feed.follow(worker.info.address)
    tokenizer = load_tokenizer(tiny_chat_model)
    gateway = build_gateway(GatewaySettings(MODEL, CACHE, limits=LIMITS), index, tokenizer, refresh_s=0.1)
    async with serve(gateway.app) as url:
        await eventually(lambda: gateway.dispatcher.routable_count() == 2)
        async with openai.AsyncOpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0) as client:
            yield Stack(client, tokenizer, index)
    await feed.close()


async def test_a_repeated_long_prompt_returns_to_the_worker_holding_it(stack: Stack) -> None:
    create = stack.client.chat.completions.create
    first = await create(model=MODEL, messages=chat("What is 2+2?"), max_tokens=5)
    assert isinstance(first.choices[0].message.content, str)
    assert first.choices[0].finish_reason == "length"
    assert first.usage.completion_tokens == 5
    assert first.usage.prompt_tokens_details.cached_tokens == 0
    home = WorkerId(first.model_extra["kvgate"]["worker"])

    # The worker's events reach the gateway's index through the feed, asynchronously: wait for them.
    text = stack.tokenizer.apply_chat_template(chat("And 3+3?"))
    hashes = hashes_of(stack.tokenizer.encode(text, add_special_tokens=False).tolist())
    assert len(hashes) >= 2
    await eventually(lambda: _holds(stack.index, hashes[:2], home))

    second = await create(model=MODEL, messages=chat("And 3+3?"), max_tokens=5)
    assert second.model_extra["kvgate"]["worker"] == home
    assert second.model_extra["kvgate"]["route_reason"] == "cache_hit"
    assert second.usage.prompt_tokens_details.cached_tokens >= 256  # the shared system prompt


async def _holds(index: MemoryPrefixIndex, hashes: list, worker: WorkerId) -> bool:
    return (await index.lookup(hashes)).chunks_for(worker) == len(hashes)
