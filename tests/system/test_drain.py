"""Shutdown drains: once stopped, the gateway (both fronts, served as ``kvgate gateway`` serves them)
takes no new request, and streams in flight, gRPC and HTTP, run to their end within the configured
grace period; past it they are cut, and the gateway still stops."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator

import grpc
import httpx

from kvgate.cluster.gateway_server import Listening, serve_gateway
from kvgate.common.clock import SystemClock
from kvgate.common.tokenizer import Tokenizer
from kvgate.gateway.compose import build_gateway
from kvgate.gateway.settings import GatewaySettings
from kvgate.index import IndexSettings, MemoryPrefixIndex
from kvgate.proto import common_pb2, gateway_pb2_grpc
from kvgate.proto.ids import WorkerId
from tests.gateway.test_grpc_front import request
from tests.support.live_gateway import CACHE, LIMITS, MODEL
from tests.support.scripted_worker import ScriptedWorker

TOKENS = 60  # at 0.1 s a token: a 6 s stream, longer than any fixed grace a gateway might assume
Serving = tuple[Listening, asyncio.Event, asyncio.Task]


@contextlib.asynccontextmanager
async def serving(
    tokenizer: Tokenizer, grace_s: float
) -> AsyncIterator[tuple[Listening, asyncio.Event, asyncio.Task]]:
    index = MemoryPrefixIndex(IndexSettings(), SystemClock())
    worker = await ScriptedWorker(WorkerId("w0"), CACHE, index, token_delay_s=0.1).start()
    settings = GatewaySettings(MODEL, CACHE, limits=LIMITS, shutdown_grace_s=grace_s)
    gateway = build_gateway(settings, index, tokenizer, refresh_s=0.2)
    stop, ready = asyncio.Event(), asyncio.get_running_loop().create_future()
    task = asyncio.create_task(serve_gateway(gateway, "127.0.0.1", 0, 0, stop, ready))
    try:
        yield await ready, stop, task
    finally:
        stop.set()
        await task
        await worker.stop()


async def grpc_stream(where: Listening, first: asyncio.Event) -> list:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{where.grpc_port}") as channel:
        messages = []
        async for message in gateway_pb2_grpc.KVGatewayStub(channel).Generate(request("drain", TOKENS)):
            messages.append(message)
            first.set()
        return messages


async def http_stream(where: Listening, first: asyncio.Event) -> list[str]:
    body = {"model": MODEL, "messages": [{"role": "user", "content": "drain"}], "max_tokens": TOKENS,
            "stream": True, "ignore_eos": True}  # fmt: skip
    async with (
        httpx.AsyncClient(base_url=f"http://127.0.0.1:{where.port}", timeout=60) as http,
        http.stream("POST", "/v1/chat/completions", json=body) as reply,
    ):
        lines = []
        async for line in reply.aiter_lines():
            if line:
                lines.append(line)
                first.set()
        return lines


def finishes(lines: list[str]) -> list[str]:
    """The finish reasons of an OpenAI event stream's chunks (one, in the last chunk, when complete)."""
    chunks = [json.loads(line.removeprefix("data: ")) for line in lines if line.startswith("data: {")]
    return [
        c["choices"][0]["finish_reason"]
        for c in chunks
        if c.get("choices") and c["choices"][0]["finish_reason"]
    ]


async def streams_under_way(where: Listening) -> tuple[asyncio.Task, asyncio.Task]:
    started = asyncio.Event(), asyncio.Event()
    streams = (
        asyncio.create_task(grpc_stream(where, started[0])),
        asyncio.create_task(http_stream(where, started[1])),
    )
    async with asyncio.timeout(30):
        await asyncio.gather(started[0].wait(), started[1].wait())
    return streams


async def refused(where: Listening) -> None:
    """Returns once a new HTTP request is refused (fails the test if that takes 10 s): the connection
    is refused, or -- when it was accepted in the instant the listener closed -- closed without an
    answer. A request that is answered is not refused, whatever the answer."""
    async with asyncio.timeout(10), httpx.AsyncClient(timeout=5) as http:
        while True:
            try:
                await http.get(f"http://127.0.0.1:{where.port}/health")
            except (httpx.ConnectError, httpx.ReadError, httpx.RemoteProtocolError):
                return
            await asyncio.sleep(0.05)


async def test_streams_in_flight_finish_within_the_grace_and_new_requests_are_refused(
    tokenizer: Tokenizer,
) -> None:
    async with serving(tokenizer, grace_s=60.0) as (where, stop, task):
        grpc_task, http_task = await streams_under_way(where)
        stop.set()
        await refused(where)  # the fronts take no new request...
        assert not grpc_task.done()  # ...while the streams go on
        messages, lines = await grpc_task, await http_task
        await task
    final = messages[-1].final
    assert messages[-1].WhichOneof("kind") == "final"
    assert final.usage.completion_tokens == TOKENS  # the whole stream, not cut at shutdown
    assert final.finish_reason == common_pb2.FINISH_REASON_LENGTH
    assert lines[-1] == "data: [DONE]"
    assert finishes(lines) == ["length"]


async def test_past_the_grace_streams_are_cut_and_the_gateway_stops(tokenizer: Tokenizer) -> None:
    async with serving(tokenizer, grace_s=1.0) as (where, stop, task):
        grpc_task, http_task = await streams_under_way(where)
        stop.set()
        started = time.monotonic()
        async with asyncio.timeout(30):
            await task
        stopped_in = time.monotonic() - started
        outcomes = await asyncio.gather(grpc_task, http_task, return_exceptions=True)
    assert stopped_in < 5.0  # the grace (1 s) and the closing, not the streams' 6 s
    cut_grpc, cut_http = outcomes
    assert isinstance(cut_grpc, grpc.aio.AioRpcError) or cut_grpc[-1].WhichOneof("kind") != "final"
    assert (
        isinstance(cut_http, Exception)
        or "data: [DONE]" not in cut_http
        or any("error" in x for x in cut_http)
    )
