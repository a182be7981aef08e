"""LoRA adapters end to end: two real workers on the tiny chat model, each holding one adapter made
with ``peft``, a real gateway, and the official ``openai`` SDK. ``tiny:sql`` (or the bare ``sql``)
goes to the worker holding ``sql`` and its greedy output equals ``peft`` + ``transformers``; the
adapters are listed under ``/v1/models``; an adapter no worker holds is a 404 naming what is served;
a repeated prompt is a cache hit under its own adapter only."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import openai
import pytest

from kvgate.common.clock import SystemClock
from kvgate.common.tokenizer import Tokenizer, load_tokenizer
from kvgate.gateway.compose import build_gateway
from kvgate.gateway.grpc_api.server import build_grpc_server
from kvgate.gateway.settings import GatewaySettings, Limits
from kvgate.index import IndexSettings, MemoryPrefixIndex
from kvgate.proto import common_pb2, gateway_pb2, gateway_pb2_grpc
from kvgate.workers.service import WorkerServer
from tests.support.http_server import serve
from tests.support.lora_adapters import greedy_text, make_adapters
from tests.support.real_workers import StartWorker
from tests.workers.service.helpers import CACHE, MAX_MODEL_LEN, eventually

MODEL = "tiny"
LIMITS = Limits(context_window=MAX_MODEL_LEN, max_output_tokens=16, request_timeout_s=30)
MESSAGES = [
    {"role": "system", "content": "You answer in SQL. " * 12},
    {"role": "user", "content": "List users."},
]
ADAPTERS = {"sql": 1, "support": 2}  # adapter id -> seed of its random weights


@dataclass
class Stack:
    client: openai.AsyncOpenAI
    tokenizer: Tokenizer
    workers: dict[str, WorkerServer]  # adapter id -> the worker holding it
    peft: dict[str, Any]  # adapter id -> peft model; "" -> the base model
    gateway: Any = None


@contextlib.asynccontextmanager
async def _front(
    model_dir: Path, index: MemoryPrefixIndex, workers: dict, refs: dict
) -> AsyncIterator[Stack]:
    """A gateway over ``index``'s two workers, served over HTTP, and the SDK's client of it."""
    tokenizer = load_tokenizer(model_dir)
    gateway = build_gateway(GatewaySettings(MODEL, CACHE, limits=LIMITS), index, tokenizer, refresh_s=0.1)
    async with serve(gateway.app) as url, contextlib.AsyncExitStack() as stack:
        await eventually(lambda: gateway.dispatcher.routable_count() == 2)
        client = openai.AsyncOpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0)
        await stack.enter_async_context(client)
        yield Stack(client, tokenizer, workers, refs, gateway)


@pytest.fixture
async def stack(start_worker: StartWorker, tiny_chat_model: Path, tmp_path: Path) -> AsyncIterator[Stack]:
    """Two workers, each holding one adapter from the start."""
    references = make_adapters(tiny_chat_model, tmp_path, ADAPTERS)
    index = MemoryPrefixIndex(IndexSettings(), SystemClock())
    workers = {
        name: await start_worker(index, worker_id=f"worker-{i}", adapters=((name, tmp_path / name),))
        for i, name in enumerate(ADAPTERS)
    }
    async with _front(tiny_chat_model, index, workers, references) as front:
        yield front


def _greedy(stack: Stack, adapter: str, n: int) -> str:
    return greedy_text(stack.peft[adapter], stack.tokenizer, MESSAGES, n)


def _served(stack: Stack) -> dict[str, int]:
    return {name: worker.engine.counters().requests for name, worker in stack.workers.items()}


async def _chat(stack: Stack, model: str) -> Any:
    client = stack.client
    return await client.chat.completions.create(model=model, messages=MESSAGES, max_tokens=8, temperature=0)


async def test_each_adapter_goes_to_its_worker_and_matches_peft(stack: Stack) -> None:
    for name in ADAPTERS:
        before = _served(stack)
        reply = await _chat(stack, f"{MODEL}:{name}")
        after = _served(stack)
        assert {w: after[w] - before[w] for w in after} == {w: int(w == name) for w in after}
        assert reply.choices[0].message.content == _greedy(stack, name, 8)
        assert reply.model == f"{MODEL}:{name}"
    assert _greedy(stack, "sql", 8) != _greedy(stack, "support", 8)  # the adapters differ: checks can fail


async def test_the_bare_adapter_id_names_it_too_and_the_base_model_still_serves(stack: Stack) -> None:
    reply = await _chat(stack, "sql")
    assert reply.choices[0].message.content == _greedy(stack, "sql", 8)
    base = await _chat(stack, MODEL)
    assert base.choices[0].message.content == _greedy(stack, "", 8)


async def test_models_lists_the_adapters_and_an_unknown_one_is_a_404(stack: Stack) -> None:
    listed = await stack.client.models.list()
    assert [m.id for m in listed.data] == [MODEL, f"{MODEL}:sql", f"{MODEL}:support"]
    card = await stack.client.models.retrieve("sql")
    assert (card.id, card.parent) == (f"{MODEL}:sql", MODEL)
    with pytest.raises(openai.NotFoundError) as caught:
        await _chat(stack, f"{MODEL}:nope")
    assert "`tiny:sql`" in caught.value.message
    assert caught.value.code == "model_not_found"


async def test_a_repeated_prompt_is_a_hit_under_its_adapter_only(stack: Stack) -> None:
    first = await _chat(stack, f"{MODEL}:sql")
    again = await _chat(stack, f"{MODEL}:sql")
    assert first.usage.prompt_tokens_details.cached_tokens == 0
    assert again.usage.prompt_tokens_details.cached_tokens > 0
    base = await _chat(stack, MODEL)  # same prompt, the base model: no block of sql's is reused
    assert base.usage.prompt_tokens_details.cached_tokens == 0


@pytest.fixture
async def loading(start_worker: StartWorker, tiny_chat_model: Path, tmp_path: Path) -> AsyncIterator[Stack]:
    """Two workers that hold no adapter at start but may load either from one folder."""
    references = make_adapters(tiny_chat_model, tmp_path, ADAPTERS)
    index = MemoryPrefixIndex(IndexSettings(), SystemClock())
    workers = {
        f"worker-{i}": await start_worker(index, worker_id=f"worker-{i}", lora_dir=tmp_path) for i in range(2)
    }
    async with _front(tiny_chat_model, index, workers, references) as front:
        yield front


async def test_an_adapter_loads_on_its_first_request_and_its_requests_stay_where_it_loaded(
    loading: Stack,
) -> None:
    listed = await loading.client.models.list()
    assert [m.id for m in listed.data] == [MODEL, f"{MODEL}:sql", f"{MODEL}:support"]
    assert not any(len(w.engine.adapters) for w in loading.workers.values())
    reply = await _chat(loading, f"{MODEL}:sql")
    assert reply.choices[0].message.content == _greedy(loading, "sql", 8)
    (home,) = [name for name, w in loading.workers.items() if "sql" in w.engine.adapters]
    for i, question in enumerate(("Count rows.", "Drop nothing.", "Join them.", "Sum it.")):
        messages = [{"role": "user", "content": f"{question} " * (20 + 7 * i)}]  # nothing cached anywhere
        other = await loading.client.chat.completions.create(
            model=f"{MODEL}:sql", messages=messages, max_tokens=2, temperature=0
        )
        assert other.model_extra["kvgate"]["worker"] == home
    assert [name for name, w in loading.workers.items() if "sql" in w.engine.adapters] == [home]


async def test_the_grpc_front_lists_and_routes_adapters_alike(stack: Stack) -> None:
    limit = stack.gateway.settings.limits.max_body_bytes
    server, port = build_grpc_server(stack.gateway.grpc_servicer(), "127.0.0.1:0", limit)
    await server.start()
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            stub = gateway_pb2_grpc.KVGatewayStub(channel)
            listed = await stub.ListModels(gateway_pb2.ListModelsRequest())
            assert [(m.id, m.ready_workers) for m in listed.models] == [
                (MODEL, 2), (f"{MODEL}:sql", 1), (f"{MODEL}:support", 1)
            ]  # fmt: skip
            request = gateway_pb2.GatewayRequest(
                model="support", prompt="SELECT", sampling=common_pb2.SamplingParams(max_tokens=2)
            )
            final = [m async for m in stub.Generate(request)][-1].final
            assert final.worker_id == "worker-1"  # the worker holding support
    finally:
        await server.stop(grace=None)
