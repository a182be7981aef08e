"""Disconnects for real, on a real engine: a worker (the tiny model, in this process) registered in a
real Redis, and a ``kvgate gateway`` process over it. A client that closes its socket mid-request, and
a gateway killed with SIGKILL mid-stream, must end the request on the worker and free its KV blocks."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import os
import signal
import sys
import time
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
MAX_MODEL_LEN = 512  # the tiny model's context: a generation to its end takes hundreds of steps
ENV = os.environ | {"KVGATE_HASH_SECRET": CACHE.secret.decode()}


@dataclasses.dataclass
class Deployment:
    worker: WorkerServer
    gateway: GatewayProcess
    free_blocks: int  # the worker's free GPU blocks when idle

    def body(self, stream: bool) -> dict:
        return {"model": "tiny", "messages": [{"role": "user", "content": "tell me everything"}],
                "max_tokens": 400, "ignore_eos": True, "stream": stream}  # fmt: skip

    def running(self) -> int:
        assert self.worker.loop is not None
        return self.worker.loop.stats.load.running_seqs

    def counters(self):
        assert self.worker.loop is not None
        return self.worker.loop.stats.counters

    def idle_again(self) -> bool:
        assert self.worker.loop is not None
        load = self.worker.loop.stats.load
        return load.running_seqs == 0 and load.gpu_blocks_free == self.free_blocks


@contextlib.asynccontextmanager
async def deployment(model: Path, redis: RedisServer) -> AsyncIterator[Deployment]:
    settings = IndexSettings(timeout_s=2.0)
    index = RedisPrefixIndex(redis_client(redis.url, settings), settings, SystemClock())
    await index.start()
    config = worker_config(model)
    worker = WorkerServer(index)
    await worker.start(config)
    port = free_port()
    command = [sys.executable, "-m", "kvgate.cli.main", "gateway", "--redis-url", redis.url,
               "--insecure",  # the service tests' secret is shorter than a deployment's may be
               "--model", str(model), "--model-name", "tiny", "--model-id", CACHE.model_id,
               "--max-model-len", str(MAX_MODEL_LEN),
               "--port", str(port), "--grpc-port", str(free_port())]  # fmt: skip
    try:
        with process(command, env=ENV) as proc:
            gateway = GatewayProcess(f"http://127.0.0.1:{port}", psutil.Process(proc.pid))
            await asyncio.to_thread(wait_until, lambda: gateway.health().get("workers") == 1)
            assert worker.loop is not None
            yield Deployment(worker, gateway, worker.loop.stats.load.gpu_blocks_free)
    finally:
        await worker.stop()
        await index.close()


async def test_a_non_streaming_client_that_disconnects_frees_the_workers_kv_blocks_within_2_s(
    tiny_chat_model: Path, private_redis: RedisServer
) -> None:
    async with deployment(tiny_chat_model, private_redis) as cluster:
        _, writer = await asyncio.open_connection("127.0.0.1", cluster.gateway.port)
        payload = json.dumps(cluster.body(stream=False)).encode()
        writer.write(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     + f"Content-Length: {len(payload)}\r\n\r\n".encode() + payload)  # fmt: skip
        await writer.drain()
        await eventually(lambda: cluster.running() == 1)  # generating, far from its 400 tokens
        writer.close()  # the client goes away: a real FIN on a real socket
        left = time.monotonic()
        await eventually(cluster.idle_again, timeout_s=10.0)
        freed_after = time.monotonic() - left
        assert cluster.counters().finished_abort == 1  # ended by the disconnect...
        assert cluster.counters().finished_length == 0  # ...not by running to max_tokens
        assert freed_after < 2.0


async def test_a_gateway_killed_mid_stream_fails_the_client_promptly_and_the_worker_aborts(
    tiny_chat_model: Path, private_redis: RedisServer
) -> None:
    async with deployment(tiny_chat_model, private_redis) as cluster:
        async with (
            httpx.AsyncClient(base_url=cluster.gateway.base, timeout=30) as http,
            http.stream("POST", "/v1/chat/completions", json=cluster.body(stream=True)) as reply,
        ):
            assert reply.status_code == 200
            lines = reply.aiter_lines()
            while not (await anext(lines)).startswith("data: {"):
                pass  # the first token is out
            os.kill(cluster.gateway.process.pid, signal.SIGKILL)
            killed = time.monotonic()
            with pytest.raises(httpx.TransportError):
                async for _ in lines:
                    pass
            failed_after = time.monotonic() - killed
        await eventually(cluster.idle_again, timeout_s=10.0)
        assert failed_after < 2.0
        assert cluster.counters().finished_abort == 1
        assert cluster.counters().finished_length == 0
