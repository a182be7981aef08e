"""Gateway replicas for real: ``kvgate gateway`` processes over a real engine worker (the tiny model, in
this process) registered in a real Redis. Two gateways keep serving, with cache hits, through a Redis
restart that loses all its data; a gateway whose clock is 5 s off routes by cache like the others."""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import psutil
import pytest

from kvgate.common.clock import SystemClock
from kvgate.index import IndexSettings, RedisPrefixIndex, redis_client
from kvgate.workers.service import WorkerServer
from tests.support.redis_server import RedisServer, free_port
from tests.system.gateway_process import GatewayProcess, process, wait_until
from tests.workers.model.conftest import one_torch_thread  # noqa: F401 -- autouse: a real engine runs here
from tests.workers.service.helpers import CACHE, eventually, worker_config

pytestmark = [pytest.mark.slow, pytest.mark.redis]
MAX_MODEL_LEN = 512
ENV = os.environ | {"KVGATE_HASH_SECRET": CACHE.secret.decode()}
SYSTEM = "You are a careful assistant. " * 10  # 290 tokens of the tiny model: two full chunks
FAKETIME = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1"


def _command(model: Path, redis_url: str, port: int) -> list[str]:
    return [sys.executable, "-m", "kvgate.cli.main", "gateway", "--redis-url", redis_url, "--insecure",
            "--model", str(model), "--model-name", "tiny", "--model-id", CACHE.model_id,
            "--max-model-len", str(MAX_MODEL_LEN), "--port", str(port),
            "--grpc-port", str(free_port())]  # fmt: skip


@contextlib.asynccontextmanager
async def deployment(
    model: Path, redis: RedisServer, envs: list[dict[str, str]], heartbeat_s: float = 0.1
) -> AsyncIterator[tuple[WorkerServer, list[GatewayProcess]]]:
    """One real worker publishing to ``redis`` and one gateway process per environment in ``envs``."""
    settings = IndexSettings(timeout_s=2.0)
    worker = WorkerServer(RedisPrefixIndex(redis_client(redis.url, settings), settings, SystemClock()))
    await worker.start(worker_config(model, max_num_seqs=4, heartbeat_s=heartbeat_s))
    try:
        with contextlib.ExitStack() as stack:
            gateways = []
            for env in envs:
                port = free_port()
                proc = stack.enter_context(process(_command(model, redis.url, port), env=ENV | env))
                gateways.append(GatewayProcess(f"http://127.0.0.1:{port}", psutil.Process(proc.pid)))
            for gateway in gateways:
                await asyncio.to_thread(wait_until, lambda g=gateway: g.health().get("workers") == 1)
            yield worker, gateways
    finally:
        await worker.stop()


async def _chat(http: httpx.AsyncClient, gateway: GatewayProcess, question: str) -> tuple[int, int]:
    """(status, cached prompt tokens) of one short chat sharing the long system prompt."""
    messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": question}]
    body = {"model": "tiny", "max_tokens": 2, "messages": messages}
    reply = await http.post(f"{gateway.base}/v1/chat/completions", json=body, timeout=60)
    if reply.status_code != 200:
        return reply.status_code, 0
    return 200, reply.json()["usage"]["prompt_tokens_details"]["cached_tokens"]


async def test_two_gateways_serve_with_cache_hits_through_a_redis_restart_that_loses_everything(
    tiny_chat_model: Path, private_redis: RedisServer
) -> None:
    # the worker heartbeats every 3 s: Redis stays empty of it that long after the restart
    cluster = deployment(tiny_chat_model, private_redis, [{}, {}], heartbeat_s=3.0)
    async with cluster as (_, gateways), httpx.AsyncClient() as http:
        statuses: list[int] = []
        degraded: list[bool] = []
        hits_by_phase: dict[str, list[int]] = {"before": [], "down": [], "after": []}
        phase = "before"

        async def traffic() -> None:
            n = 0
            while True:
                status, cached = await _chat(http, gateways[n % 2], f"question {n}")
                statuses.append(status)
                hits_by_phase[phase].append(cached)
                degraded.append(await _degraded(http, gateways[n % 2]))
                n += 1

        sender = asyncio.create_task(traffic())
        try:
            await eventually(lambda: len(hits_by_phase["before"]) >= 6, timeout_s=60)
            await asyncio.to_thread(private_redis.stop)  # everything in Redis is gone with it
            phase = "down"
            await eventually(lambda: _report_redis(http, gateways, reachable=False), timeout_s=30)
            await eventually(lambda: len(hits_by_phase["down"]) >= 6, timeout_s=60)
            await asyncio.to_thread(private_redis.start)
            phase = "after"
            await eventually(lambda: _registered(private_redis.url), timeout_s=30)  # the worker is back in
            await eventually(lambda: _report_redis(http, gateways, reachable=True), timeout_s=30)
            count = len(hits_by_phase["after"])
            await eventually(lambda: len(hits_by_phase["after"]) >= count + 6, timeout_s=60)
        finally:
            sender.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await sender

    assert set(statuses) == {200}  # not one 503 for lack of an index
    assert not any(degraded)  # and never routed by load alone: the replicas answered every lookup
    for phase_hits in hits_by_phase.values():
        assert sum(1 for cached in phase_hits[1:] if cached > 0) >= len(phase_hits) - 2


async def test_a_conversation_stored_through_one_gateway_continues_through_the_other(
    tiny_chat_model: Path, private_redis: RedisServer
) -> None:
    """``kvgate gateway`` keeps the Responses API's stored responses in its Redis: any replica can
    continue, read or delete them, and the continuation reuses the first turn's cached blocks."""
    async with (
        deployment(tiny_chat_model, private_redis, [{}, {}]) as (_, gateways),
        httpx.AsyncClient() as http,
    ):
        ask = {"model": "tiny", "instructions": SYSTEM, "max_output_tokens": 2}
        first = await http.post(f"{gateways[0].base}/v1/responses", json=ask | {"input": "hello"}, timeout=60)
        assert first.status_code == 200, first.text
        rid = first.json()["id"]
        then = ask | {"input": "and then?", "previous_response_id": rid}
        second = await http.post(f"{gateways[1].base}/v1/responses", json=then, timeout=60)
        assert second.status_code == 200, second.text
        assert (
            second.json()["usage"]["input_tokens_details"]["cached_tokens"] >= 256
        )  # the system prompt's chunks
        assert second.json()["usage"]["input_tokens"] > first.json()["usage"]["input_tokens"]
        assert (await http.get(f"{gateways[1].base}/v1/responses/{rid}", timeout=10)).status_code == 200
        assert (await http.delete(f"{gateways[1].base}/v1/responses/{rid}", timeout=10)).status_code == 200
        assert (await http.get(f"{gateways[0].base}/v1/responses/{rid}", timeout=10)).status_code == 404


async def _degraded(http: httpx.AsyncClient, gateway: GatewayProcess) -> bool:
    """Whether the gateway's dry run routes without its index (by load alone)."""
    messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "route me"}]
    reply = await http.post(
        f"{gateway.base}/v1/route", json={"model": "tiny", "messages": messages}, timeout=60
    )
    return reply.status_code != 200 or reply.json()["index_degraded"]


async def _report_redis(http: httpx.AsyncClient, gateways: list[GatewayProcess], reachable: bool) -> bool:
    """Whether every gateway's /health says Redis is (un)reachable, serving its one worker all along
    (status ``degraded`` while Redis is out of reach)."""
    for gateway in gateways:
        reply = await http.get(f"{gateway.base}/health", timeout=10)
        body = reply.json()
        assert reply.status_code == 200, body
        assert body["workers"] == 1, body
        if body["shared_index_reachable"] is not reachable:
            return False
        assert body["status"] == ("ok" if reachable else "degraded"), body
    return True


async def _registered(url: str) -> bool:
    index = RedisPrefixIndex(redis_client(url, IndexSettings(timeout_s=1.0)), IndexSettings(), SystemClock())
    try:
        return len(await index.workers()) == 1
    except Exception:
        return False
    finally:
        await index.close()


@pytest.mark.parametrize("skew", ["+5s", "-5s"])
async def test_a_gateway_whose_clock_is_5_s_off_routes_by_cache_like_the_others(
    tiny_chat_model: Path, private_redis: RedisServer, skew: str
) -> None:
    if not os.path.exists(FAKETIME):  # noqa: ASYNC240 -- one stat at set-up
        if os.environ.get("KVGATE_REQUIRE_REDIS"):
            pytest.fail("libfaketime is not installed (apt-get install -y faketime)")
        pytest.skip("libfaketime is not installed (apt-get install -y faketime)")
    skewed = {"LD_PRELOAD": FAKETIME, "FAKETIME": skew, "FAKETIME_DONT_FAKE_MONOTONIC": "1"}
    async with (
        deployment(tiny_chat_model, private_redis, [{}, skewed]) as (_, gateways),
        httpx.AsyncClient() as http,
    ):
        fair, skewed_gateway = gateways
        assert (await _chat(http, fair, "first"))[0] == 200
        for n in range(6):  # several seconds of heartbeats and lookups on the skewed clock
            status, cached = await _chat(http, skewed_gateway, f"again {n}")
            assert (status, cached > 0) == (200, True)
            assert skewed_gateway.health()["workers"] == 1
            await asyncio.sleep(0.5)
