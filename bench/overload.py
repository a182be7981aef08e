"""Overload: a real ``kvgate gateway`` process over scripted workers (their own process, a real Redis
index), driven open-loop at 0.5x and then 2x the workers' sustainable rate, then checked for recovery.

Shows that past capacity the gateway refuses fast (429/503 with Retry-After) instead of queueing, that
admitted requests keep their latency, that nothing is lost (every request gets an answer), that the
capacity comes back in full afterwards (no leaked slots) and that the gateway's memory stays flat.

    python bench/overload.py [--seconds 10] [--out bench/results]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import psutil

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.machine import command_line, git_commit
from kvgate.loadgen.open_loop import Outcome, open_loop
from kvgate.loadgen.report import percentile
from tests.support.redis_server import RedisServer, free_port

MODEL = "SmolLM2-135M-Instruct"


@dataclass(frozen=True)
class Setup:
    """Workers x slots / (tokens x token delay) = the sustainable rate; the run offers ``under`` times
    that rate, then ``over`` times it."""

    workers: int = 2
    slots: int = 4
    tokens: int = 8
    token_delay_s: float = 0.025
    seconds: float = 10.0
    max_concurrent_requests: int = 1024
    under: float = 0.5
    over: float = 2.0

    @property
    def sustainable_per_s(self) -> float:
        return self.workers * self.slots / (self.tokens * self.token_delay_s)


def run(setup: Setup, redis_url: str | None = None) -> dict:
    """Starts what it needs (Redis unless ``redis_url``), runs the phases, stops everything."""
    with contextlib.ExitStack() as stack:
        if redis_url is None:
            redis_url = stack.enter_context(_redis()).url
        secret = "overload-bench-secret-0123456789"
        env = os.environ | {"KVGATE_HASH_SECRET": secret, "RAY_USAGE_STATS_ENABLED": "0"}
        stack.enter_context(_process(_cluster_command(setup, redis_url), env, ready_line="ready"))
        port = free_port()
        gateway = stack.enter_context(_process(_gateway_command(setup, redis_url, port), env))
        base = f"http://127.0.0.1:{port}"
        _wait_healthy(base, setup.workers)
        return asyncio.run(_phases(setup, base, psutil.Process(gateway.pid)))


async def _phases(setup: Setup, base: str, gateway: psutil.Process) -> dict:
    limits = httpx.Limits(max_connections=4096, max_keepalive_connections=256)
    async with httpx.AsyncClient(base_url=base, timeout=60, limits=limits) as client:
        await _send(client, 0)  # warm up
        rss = _RssSampler(gateway)
        with rss:
            phases = {}
            for name, factor in (("under", setup.under), ("over", setup.over)):
                rate = factor * setup.sustainable_per_s
                body = _body(setup, name)
                outcomes = await open_loop(client, "/v1/chat/completions", body, rate, setup.seconds)
                phases[name] = {"factor": factor} | _summary(outcomes, rate, setup.seconds)
            recovery = [await _send(client, i) for i in range(2 * setup.workers * setup.slots)]
    return {
        "commit": git_commit(short=True),
        "command": command_line(),
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}",
        "setup": setup.__dict__ | {"sustainable_per_s": setup.sustainable_per_s},
        "phases": phases,
        "recovery_statuses": dict(Counter(recovery)),
        "gateway_rss_mb": rss.summary(),
    }


def _summary(outcomes: list[Outcome], rate: float, seconds: float) -> dict:
    admitted = [o.latency_s for o in outcomes if o.status == 200]
    refused = [o for o in outcomes if o.status in (429, 503)]
    return {
        "offered_per_s": rate,
        "requests": len(outcomes),
        "statuses": {str(k): v for k, v in sorted(Counter(o.status for o in outcomes).items())},
        "admitted_per_s": len(admitted) / seconds,
        "admitted_p50_s": percentile(admitted, 0.5),
        "admitted_p99_s": percentile(admitted, 0.99),
        "refused_p50_s": percentile([o.latency_s for o in refused], 0.5),
        "refused_p99_s": percentile([o.latency_s for o in refused], 0.99),
        "refused_with_retry_after": sum(o.retry_after for o in refused),
        "lost": sum(o.status not in (200, 429, 503) for o in outcomes),
    }


def _body(setup: Setup, tag: str):
    return lambda i: {
        "model": MODEL,
        "messages": [{"role": "user", "content": f"{tag} request {i}: say something."}],
        "max_tokens": setup.tokens,
    }


async def _send(client: httpx.AsyncClient, i: int) -> int:
    body = {"model": MODEL, "messages": [{"role": "user", "content": f"check {i}"}], "max_tokens": 2}
    return (await client.post("/v1/chat/completions", json=body)).status_code


class _RssSampler:
    """The gateway's resident memory every 0.25 s while in the ``with`` block."""

    def __init__(self, process: psutil.Process) -> None:
        self._process = process
        self._samples: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> _RssSampler:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(0.25):
            self._samples.append(self._process.memory_info().rss / 2**20)

    def summary(self) -> dict[str, float]:
        return {"first": self._samples[0], "max": max(self._samples), "last": self._samples[-1]}


def _cluster_command(setup: Setup, redis_url: str) -> list[str]:
    return [sys.executable, "-m", "tests.support.scripted_cluster", "--redis-url", redis_url,
            "--workers", str(setup.workers), "--max-in-flight", str(setup.slots),
            "--token-delay", str(setup.token_delay_s)]  # fmt: skip


def _gateway_command(setup: Setup, redis_url: str, port: int) -> list[str]:
    return [sys.executable, "-m", "kvgate.cli.main", "gateway", "--redis-url", redis_url, "--port", str(port),
            "--grpc-port", str(free_port()),
            "--max-concurrent-requests", str(setup.max_concurrent_requests)]  # fmt: skip


@contextlib.contextmanager
def _redis() -> Iterator[RedisServer]:
    server = RedisServer().start()
    try:
        yield server
    finally:
        server.stop()


@contextlib.contextmanager
def _process(command: list[str], env: dict, ready_line: str | None = None) -> Iterator[subprocess.Popen]:
    root = Path(__file__).resolve().parents[1]
    process = subprocess.Popen(command, env=env, cwd=root, stdout=subprocess.PIPE, text=True)
    try:
        if ready_line is not None:
            line = process.stdout.readline()
            if line.strip() != ready_line:
                raise RuntimeError(f"{command[2]} did not start: {line!r}")
        yield process
    finally:
        process.terminate()
        try:
            process.wait(15)
        except subprocess.TimeoutExpired:
            process.kill()


def _wait_healthy(base: str, workers: int, timeout_s: float = 120) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(f"{base}/health", timeout=2).json().get("workers") == workers:
                return
        time.sleep(0.2)
    raise RuntimeError("the gateway did not see the workers")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--out", type=Path, default=Path("bench/results"))
    args = parser.parse_args()
    report = run(Setup(seconds=args.seconds))
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "overload.json").write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
