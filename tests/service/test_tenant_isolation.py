"""Tenant isolation with the real engine: one real worker behind the real gateway, so every request
lands on the same KV cache. Each tenant reuses its own prefix; the other tenant's identical prompt is
computed afresh, because the worker hashes with the salt the gateway derived from the API key; the
index holds each tenant's chunks under that tenant's root only."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import openai

from kvgate.clock import SystemClock
from kvgate.gateway.compose import build_gateway
from kvgate.gateway.settings import GatewaySettings
from kvgate.gateway.tenancy import KeyRing, Tenant, hash_key
from kvgate.gateway.upstream.event_feed import EventFeed
from kvgate.index import IndexSettings, MemoryPrefixIndex
from kvgate.proto.hashing import chunk_hashes
from kvgate.proto.ids import WorkerId
from kvgate.tokenizer import load_tokenizer
from tests.service.conftest import StartWorker
from tests.service.helpers import CACHE, eventually
from tests.service.test_end_to_end import LIMITS, MODEL, chat
from tests.support.http_server import serve

KEYS = {"acme": "kvg-acme", "beta": "kvg-beta"}


async def test_each_tenant_reuses_only_its_own_prefix_on_a_shared_worker(
    start_worker: StartWorker, tiny_model: Path
) -> None:
    index = MemoryPrefixIndex(IndexSettings(), SystemClock())
    feed = EventFeed(index, poll_s=0.2)
    worker = await start_worker(worker_id="worker-0")
    feed.follow(worker.info.address)
    tokenizer = load_tokenizer(tiny_model)
    ring = KeyRing([(hash_key(key), Tenant(name)) for name, key in KEYS.items()])
    settings = GatewaySettings(MODEL, CACHE, limits=LIMITS, keys=ring)
    gateway = build_gateway(settings, index, tokenizer, refresh_s=0.1)
    ids = tokenizer.encode(tokenizer.apply_chat_template(chat("probe")), add_special_tokens=False)
    try:
        async with serve(gateway.app) as url:
            await eventually(lambda: gateway.dispatcher.routable_count() == 1)
            clients = {
                name: openai.AsyncOpenAI(base_url=f"{url}/v1", api_key=key, max_retries=0)
                for name, key in KEYS.items()
            }

            async def cached(tenant: str, question: str) -> int:
                reply = await clients[tenant].chat.completions.create(
                    model=MODEL, messages=chat(question), max_tokens=2
                )
                return reply.usage.prompt_tokens_details.cached_tokens

            assert await cached("acme", "q1") == 0
            assert await cached("acme", "q2") >= 256  # the system prompt's two chunks
            assert await cached("beta", "q1") == 0  # same tokens, same worker: not acme's blocks
            assert await cached("beta", "q2") >= 256
            acme, beta = (_hashes(ids, f"tenant:{name}")[:2] for name in KEYS)
            unsalted = _hashes(ids, "")[:2]
            await eventually(lambda: _held(index, acme))
            assert await _held(index, beta)
            assert not await _held(index, unsalted)
            assert not set(acme) & set(beta)
            for client in clients.values():
                await client.close()
    finally:
        await feed.close()


def _hashes(ids: np.ndarray, salt: str) -> list:
    root = CACHE.root(cache_salt=salt).digest()
    return chunk_hashes(np.asarray(ids, dtype=np.uint32), root, CACHE.chunk_size)


async def _held(index: MemoryPrefixIndex, hashes: list) -> bool:
    return (await index.lookup(hashes)).chunks_for(WorkerId("worker-0")) == len(hashes)
