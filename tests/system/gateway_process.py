"""A real ``kvgate gateway`` process over scripted workers in a process of their own, sharing a real
Redis index: the stand-in deployment for tests that attack the gateway from outside."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import httpx
import psutil

from tests.common.tokenizer.default_model import smollm2_gguf
from tests.support.redis_server import free_port

ROOT = Path(__file__).resolve().parents[2]
SECRET = "gateway-process-test-secret-0123456789"
ENV = os.environ | {"KVGATE_HASH_SECRET": SECRET}
T = TypeVar("T")


@dataclass(frozen=True)
class GatewayProcess:
    base: str
    process: psutil.Process

    @property
    def port(self) -> int:
        return int(self.base.rsplit(":", 1)[1])

    def health(self) -> dict:
        """``/health``'s body, or {} when it does not answer."""
        with contextlib.suppress(httpx.HTTPError, ValueError):
            return httpx.get(f"{self.base}/health", timeout=2).json()
        return {}

    def model(self) -> str:
        return httpx.get(f"{self.base}/v1/models", timeout=10).json()["data"][0]["id"]

    def rss_mib(self) -> float:
        return self.process.memory_info().rss / 2**20


@contextlib.contextmanager
def process(
    command: list[str], ready_line: str | None = None, env: dict[str, str] | None = None
) -> Iterator[subprocess.Popen[str]]:
    """Runs ``command`` from the repository root with ``env`` (default: the deployment secret of this
    module); waits for ``ready_line`` on its stdout first when given; terminates it at the end."""
    proc = subprocess.Popen(command, env=env or ENV, cwd=ROOT, stdout=subprocess.PIPE, text=True)
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


@contextlib.contextmanager
def gateway_over_scripted_workers(
    redis_url: str, *gateway_args: str, workers: int = 1
) -> Iterator[GatewayProcess]:
    """``kvgate gateway`` (default model, ``gateway_args``) and ``workers`` scripted workers, up and
    routable."""
    smollm2_gguf()  # the gateway tokenizes with the default model
    cluster = [sys.executable, "-m", "tests.support.scripted_cluster", "--redis-url", redis_url,
               "--workers", str(workers), "--token-delay", "0"]  # fmt: skip
    with process(cluster, ready_line="ready"), gateway(redis_url, *gateway_args, workers=workers) as running:
        yield running


@contextlib.contextmanager
def gateway(redis_url: str, *gateway_args: str, workers: int = 1) -> Iterator[GatewayProcess]:
    """One more ``kvgate gateway`` process over the same Redis, up once it sees ``workers`` workers."""
    port = free_port()
    command = [sys.executable, "-m", "kvgate.cli.main", "gateway", "--redis-url", redis_url,
               "--port", str(port), "--grpc-port", str(free_port()), *gateway_args]  # fmt: skip
    with process(command) as proc:
        running = GatewayProcess(f"http://127.0.0.1:{port}", psutil.Process(proc.pid))
        wait_until(lambda: running.health().get("workers") == workers)
        yield running


def wait_until(check: Callable[[], T], timeout_s: float = 120.0) -> T:
    """``check()``'s first truthy value, polled every 0.1 s; AssertionError after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if value := check():
            return value
        time.sleep(0.1)
    raise AssertionError(f"not true after {timeout_s} s")
