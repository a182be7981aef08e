"""A worker whose engine stores int8 KV, end to end: the official ``openai`` SDK against the real gateway
(with the same ``kv_dtype`` in its layout) serves chats and reuses a shared system prompt's blocks; a
gateway whose layout names no KV dtype refuses that worker by its fingerprint instead of routing to it."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import torch

from kvgate.common.clock import SystemClock
from kvgate.common.tokenizer import load_tokenizer
from kvgate.gateway.settings import Limits
from kvgate.gateway.upstream.directory import WorkerDirectory
from kvgate.index import IndexSettings, MemoryPrefixIndex
from kvgate.workers.service import WorkerServer
from tests.workers.service.helpers import CACHE, MAX_MODEL_LEN, eventually, worker_config
from tests.workers.service.openai_front import openai_front

MODEL = "tiny"
INT8 = dataclasses.replace(CACHE, kv_dtype="int8")
LIMITS = Limits(context_window=MAX_MODEL_LEN, max_output_tokens=16, request_timeout_s=30)
SYSTEM = "Be brief and kind. " * 20  # more than one 128-token chunk


@dataclasses.dataclass
class Int8Worker:
    server: WorkerServer
    index: MemoryPrefixIndex


@pytest.fixture
async def int8_worker(tiny_chat_model: Path) -> AsyncIterator[Int8Worker]:
    index = MemoryPrefixIndex(IndexSettings(), SystemClock())
    config = worker_config(tiny_chat_model)
    config = dataclasses.replace(config, engine=dataclasses.replace(config.engine, cache=INT8))
    server = WorkerServer(index)
    await server.start(config)
    yield Int8Worker(server, index)
    await server.stop()


async def test_an_int8_worker_serves_chats_with_cache_hits(
    int8_worker: Int8Worker, tiny_chat_model: Path
) -> None:
    tokenizer = load_tokenizer(tiny_chat_model)
    async with openai_front(int8_worker.index, tokenizer, LIMITS, MODEL, cache=INT8) as client:
        replies = []
        for question in ("Count to five.", "Name a colour."):
            messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": question}]
            replies.append(
                await client.chat.completions.create(
                    model=MODEL, messages=messages, max_tokens=4, temperature=0
                )
            )
    assert all(reply.choices[0].message.content for reply in replies)
    assert replies[0].usage.prompt_tokens_details.cached_tokens == 0
    assert replies[1].usage.prompt_tokens_details.cached_tokens >= INT8.chunk_size
    pool = int8_worker.server.engine.runner.gpu[0]
    assert pool.k.dtype == torch.int8
    assert pool.k_scale is not None


async def test_a_gateway_of_another_kv_dtype_refuses_the_worker(int8_worker: Int8Worker) -> None:
    directory = WorkerDirectory(int8_worker.index, CACHE.fingerprint(), secret=CACHE.secret)

    async def refused() -> str | None:
        await directory.refresh()
        return directory.rejected.get(int8_worker.server.info.worker_id)

    assert "config fingerprint" in await eventually(refused)
    assert directory.live() == []
