"""Worker records forged in Redis, against real processes: ``kvgate gateway`` and a worker process
(scripted workers, registered and signed as real ones are) share a real Redis; an attacker who can
write to Redis but lacks the deployment secret registers records pointing at its own listener.

The gateway must refuse them: the listener sees no connection, while every request succeeds."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from kvgate.common.clock import SystemClock
from kvgate.index import IndexSettings, RedisPrefixIndex, redis_client
from kvgate.proto.ids import WorkerId
from kvgate.proto.trust import sign_record
from kvgate.proto.workers import WorkerInfo, WorkerLoad
from tests.common.tokenizer.default_model import smollm2_gguf
from tests.support.redis_server import RedisServer, free_port

pytestmark = [pytest.mark.slow, pytest.mark.redis]
ROOT = Path(__file__).resolve().parents[2]
ENV = os.environ | {"KVGATE_HASH_SECRET": "forged-worker-test-secret-0123456789"}
IDLE = WorkerLoad(gpu_blocks_total=100, gpu_blocks_free=100)


class Listener:
    """A TCP listener on loopback that counts the connections it accepts (and closes them)."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.sock.settimeout(0.2)
        self.address = f"127.0.0.1:{self.sock.getsockname()[1]}"
        self.accepted = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            with contextlib.suppress(TimeoutError, OSError):
                conn, _ = self.sock.accept()
                self.accepted += 1
                conn.close()

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        self.sock.close()


@contextlib.contextmanager
def process(command: list[str], ready_line: str | None = None) -> Iterator[subprocess.Popen[str]]:
    proc = subprocess.Popen(command, env=ENV, cwd=ROOT, stdout=subprocess.PIPE, text=True)
    try:
        if ready_line is not None:
            assert proc.stdout is not None
            assert proc.stdout.readline().strip() == ready_line
        yield proc
    finally:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()


def health(base: str) -> dict:
    with contextlib.suppress(httpx.HTTPError, ValueError):
        return httpx.get(f"{base}/health", timeout=2).json()
    return {}


def wait_until(check, timeout_s: float = 120.0):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if value := check():
            return value
        time.sleep(0.1)
    raise AssertionError(f"not true after {timeout_s} s")


async def forge(redis_url: str, listener: Listener) -> list[WorkerInfo]:
    """Registers two forged records beside the genuine one, both idle, both at ``listener``: one
    unsigned, one with the genuine record's signature; live for minutes (no heartbeat needed)."""
    settings = IndexSettings(heartbeat_ttl_s=600.0)
    index = RedisPrefixIndex(redis_client(redis_url, settings), settings, SystemClock())
    try:
        (genuine,) = [s.info for s in await index.workers()]
        copied = dataclasses.replace(genuine, worker_id=WorkerId("forged-copy"), address=listener.address)
        unsigned = sign_record(dataclasses.replace(copied, worker_id=WorkerId("forged-unsigned")), b"")
        wrong_key = sign_record(dataclasses.replace(copied, worker_id=WorkerId("forged-key")), b"x" * 32)
        for record in (copied, unsigned, wrong_key):
            await index.register(record, IDLE)
        return [copied, unsigned, wrong_key]
    finally:
        await index.close()


def test_a_record_forged_without_the_signing_key_receives_no_request(private_redis: RedisServer) -> None:
    smollm2_gguf()  # the gateway tokenizes with the default model
    listener = Listener()
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    worker = [sys.executable, "-m", "tests.support.scripted_cluster", "--redis-url", private_redis.url,
              "--workers", "1", "--token-delay", "0"]  # fmt: skip
    gateway = [sys.executable, "-m", "kvgate.cli.main", "gateway", "--redis-url", private_redis.url,
               "--port", str(port), "--grpc-port", str(free_port())]  # fmt: skip
    try:
        with process(worker, ready_line="ready"), process(gateway):
            wait_until(lambda: health(base).get("workers") == 1)
            forged = asyncio.run(forge(private_redis.url, listener))
            # the gateway has read them all, whether it routes to them or refuses them
            wait_until(
                lambda: (h := health(base)) and h["workers"] + h.get("refused_workers", 0) == 1 + len(forged)
            )
            model = httpx.get(f"{base}/v1/models", timeout=10).json()["data"][0]["id"]
            statuses = [
                httpx.post(f"{base}/v1/completions", timeout=60,
                           json={"model": model, "prompt": f"request {i}: " + "word " * 40, "max_tokens": 2}
                           ).status_code
                for i in range(24)
            ]  # fmt: skip
            assert health(base)["refused_workers"] == len(forged)
    finally:
        listener.close()
    assert statuses == [200] * 24
    assert listener.accepted == 0
