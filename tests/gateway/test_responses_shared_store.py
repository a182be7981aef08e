"""Two gateway replicas over one Redis: a response stored through one is continued, read and deleted
through the other (the store is shared), still per tenant; and a Redis that stops answering does not
cost a client its answer, only the continuation."""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import AsyncIterator

import openai
import pytest
from redis.asyncio import Redis

from kvgate.common.clock import SystemClock
from kvgate.common.tokenizer import Tokenizer
from kvgate.gateway.compose import build_gateway
from kvgate.gateway.conversations import RedisResponseStore, ResponseStoreSettings
from kvgate.gateway.settings import GatewaySettings
from kvgate.index import IndexSettings, MemoryPrefixIndex
from kvgate.proto.ids import WorkerId
from tests.support.http_server import serve
from tests.support.live_gateway import CACHE, LIMITS, MODEL
from tests.support.redis_server import RedisServer
from tests.support.scripted_worker import ScriptedWorker


@contextlib.asynccontextmanager
async def replicas(
    tokenizer: Tokenizer, redis_url: str, count: int = 2
) -> AsyncIterator[list[openai.AsyncOpenAI]]:
    """``count`` gateways over the same scripted workers, their responses in one Redis namespace."""
    index = MemoryPrefixIndex(IndexSettings(), SystemClock())
    workers = [await ScriptedWorker(WorkerId(f"w{i}"), CACHE, index).start() for i in range(2)]
    client = Redis.from_url(redis_url, decode_responses=True, socket_timeout=1, socket_connect_timeout=1)
    namespace = f"test:{uuid.uuid4().hex}"
    async with contextlib.AsyncExitStack() as stack:
        sdks = []
        for _ in range(count):
            store = RedisResponseStore(client, ResponseStoreSettings(), time.time, namespace=namespace)
            config = GatewaySettings(MODEL, CACHE, limits=LIMITS)
            gateway = build_gateway(config, index, tokenizer, refresh_s=0.2, responses=store)
            url = await stack.enter_async_context(serve(gateway.app))
            sdks.append(await stack.enter_async_context(
                openai.AsyncOpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0)))  # fmt: skip
        try:
            yield sdks
        finally:
            await client.aclose()
            for worker in workers:
                await worker.stop()


async def test_a_response_stored_through_one_replica_is_continued_through_another(
    tokenizer: Tokenizer, redis_url: str
) -> None:
    async with replicas(tokenizer, redis_url) as (one, other):
        first = await one.responses.create(model=MODEL, input="What is a chunk?", max_output_tokens=3)
        assert (await other.responses.retrieve(first.id)).output_text == first.output_text
        second = await other.responses.create(
            model=MODEL, input="And a block?", previous_response_id=first.id, max_output_tokens=3
        )
        conversation = [{"role": "user", "content": "What is a chunk?"},
                        {"role": "assistant", "content": first.output_text},
                        {"role": "user", "content": "And a block?"}]  # fmt: skip
        text = tokenizer.apply_chat_template(conversation)
        assert second.usage is not None
        assert second.usage.input_tokens == len(tokenizer.encode(text, add_special_tokens=False))
        await one.responses.delete(second.id)
        with pytest.raises(openai.NotFoundError):  # deleted through one replica: gone through the other
            await other.responses.retrieve(second.id)


async def test_a_store_that_stops_answering_costs_the_continuation_not_the_answer(
    tokenizer: Tokenizer,
) -> None:
    with RedisServer() as server:
        async with replicas(tokenizer, server.url, count=1) as (sdk,):
            kept = await sdk.responses.create(model=MODEL, input="Hello", max_output_tokens=2)
            server.stop()
            answered = await sdk.responses.create(model=MODEL, input="Hello again", max_output_tokens=2)
            assert answered.output_text  # answered, though it could not be stored
            with pytest.raises(openai.APIStatusError) as failed:
                await sdk.responses.create(model=MODEL, input="Go on", previous_response_id=kept.id,
                                           max_output_tokens=2)  # fmt: skip
            assert failed.value.status_code == 502
            assert failed.value.body["code"] == "response_store_unavailable"  # type: ignore[index]
