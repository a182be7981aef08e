"""Tenant isolation with the real engine: one real worker behind the real gateway, so every request
lands on the same KV cache. Each tenant reuses its own prefix; the other tenant's identical prompt is
computed afresh, because the worker hashes with the salt the gateway derived from the API key; the
index holds each tenant's chunks under that tenant's root only."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import openai

from kvgate.common.clock import SystemClock
from kvgate.common.tokenizer import load_tokenizer
from kvgate.gateway.compose import build_gateway
from kvgate.gateway.core.scope import cache_scope
from kvgate.gateway.settings import GatewaySettings
from kvgate.gateway.tenancy import Caller, KeyRing, Tenant, hash_key
from kvgate.index import IndexSettings, MemoryPrefixIndex
from kvgate.index.event_feed import EventFeed
from kvgate.proto.hashing import chunk_hashes
from kvgate.proto.ids import WorkerId
from tests.support.http_server import serve
from tests.support.real_workers import StartWorker
from tests.workers.service.helpers import CACHE, eventually
from tests.workers.service.test_end_to_end import LIMITS, MODEL, chat

KEYS = {"acme": "kvg-acme", "beta": "kvg-beta"}
PUBLIC = frozenset({"public"})


async def test_each_tenant_reuses_only_its_own_prefix_on_a_shared_worker(
    start_worker: StartWorker, tiny_chat_model: Path
) -> None:
    index = MemoryPrefixIndex(IndexSettings(), SystemClock())
    feed = EventFeed(index, poll_s=0.2, secret=CACHE.secret)
    worker = await start_worker(worker_id="worker-0")
    feed.follow(worker.info.address)
    tokenizer = load_tokenizer(tiny_chat_model)
    ring = KeyRing([(hash_key(key), Tenant(name, shared_namespaces=PUBLIC)) for name, key in KEYS.items()])
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
            acme, beta = (_hashes(ids, cache_scope(Caller(Tenant(name)), "", None, CACHE).private_salt)[:2]
                          for name in KEYS)  # fmt: skip
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


async def test_a_shared_namespace_shares_the_system_prompt_and_nothing_after_it(
    start_worker: StartWorker, tiny_chat_model: Path
) -> None:
    """Both tenants opt into ``public``: the second reuses the first's system prompt (whole chunks of
    it, under the namespace's root) but not the identical conversation after it, which each tenant
    hashes under its own root from the rebase on; the engine's block-level chain agrees."""
    index = MemoryPrefixIndex(IndexSettings(), SystemClock())
    worker = await start_worker(worker_id="worker-0")
    feed = EventFeed(index, poll_s=0.2, secret=CACHE.secret)
    feed.follow(worker.info.address)
    tokenizer = load_tokenizer(tiny_chat_model)
    ring = KeyRing([(hash_key(key), Tenant(name, shared_namespaces=PUBLIC)) for name, key in KEYS.items()])
    gateway = build_gateway(GatewaySettings(MODEL, CACHE, limits=LIMITS, keys=ring), index, tokenizer, 0.1)
    conversation = [*chat("x")[:1], {"role": "user", "content": "Tell me about our own plans. " * 5}]
    system_text = tokenizer.apply_chat_template(conversation[:1], add_generation_prompt=False)
    system_ids = tokenizer.encode(system_text, add_special_tokens=False)
    shared_tokens = len(system_ids) // CACHE.chunk_size * CACHE.chunk_size
    assert shared_tokens >= CACHE.chunk_size
    try:
        async with serve(gateway.app) as url:
            await eventually(lambda: gateway.dispatcher.routable_count() == 1)
            headers = {"x-kvgate-cache-namespace": "public"}

            async def cached(tenant: str) -> tuple[int, int]:
                async with openai.AsyncOpenAI(base_url=f"{url}/v1", api_key=KEYS[tenant], max_retries=0,
                                              default_headers=headers) as client:  # fmt: skip
                    create = client.chat.completions.create
                    reply = await create(model=MODEL, messages=conversation, max_tokens=2)
                return reply.usage.prompt_tokens_details.cached_tokens, reply.usage.prompt_tokens

            assert (await cached("acme"))[0] == 0
            own, prompt_tokens = await cached("acme")
            assert own >= prompt_tokens // CACHE.block_size * CACHE.block_size - CACHE.block_size
            assert prompt_tokens - shared_tokens > CACHE.chunk_size  # a private part of whole chunks
            assert (await cached("beta"))[0] == shared_tokens  # the system prompt, and not one block more
    finally:
        await feed.close()
