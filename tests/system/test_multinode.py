"""Multi-node for real: a two-node Ray cluster on loopback (``ray start --head``, then ``ray start
--address`` with its own resources), ``kvgate workers`` placing one worker on each node, and two
``kvgate gateway`` processes sharing one Redis: a prefix warmed through gateway A is a hit through B."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import signal
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import psutil
import pytest

from kvgate.common.clock import SystemClock
from kvgate.index import IndexSettings, RedisPrefixIndex, redis_client
from tests.support.redis_server import RedisServer, free_port, free_ports
from tests.system.up_process import cmdline, wait_for

pytestmark = [pytest.mark.slow, pytest.mark.ray, pytest.mark.redis]
# Loopback test cluster: no token auth between the two local nodes.
ENV = os.environ | {
    "RAY_USAGE_STATS_ENABLED": "0",
    "RAY_AUTH_MODE": "disabled",
    "KVGATE_HASH_SECRET": "multinode-test-secret-0123456789",
}
SYSTEM = "You route requests to the worker that holds their prefix. " * 5  # ~300 byte-level tokens


def model_args(model: Path) -> list[str]:
    return ["--model", str(model), "--model-name", "tiny", "--model-id", "tiny", "--max-model-len", "512"]


@contextlib.contextmanager
def ray_cluster() -> Iterator[str]:
    """A head node and a second node on loopback, one CPU each; yields the head's address."""
    temp = tempfile.mkdtemp(prefix="kvr-", dir="/tmp")
    port = free_port()
    head = [
        "ray",
        "start",
        "--head",
        f"--port={port}",
        "--num-cpus=1",
        f"--temp-dir={temp}",
        "--include-dashboard=false",
        "--disable-usage-stats",
    ]
    second = ["ray", "start", f"--address=127.0.0.1:{port}", "--num-cpus=1", '--resources={"second":1}']
    try:
        subprocess.run(head, env=ENV, check=True, capture_output=True, timeout=120)
        subprocess.run(second, env=ENV, check=True, capture_output=True, timeout=120)
        yield f"127.0.0.1:{port}"
    finally:
        stop_cluster(temp)


def stop_cluster(temp: str) -> None:
    """Ends the processes of this cluster only (both nodes' share its temp dir); `ray stop` would end
    every Ray cluster of the user on the machine. A process may start while others stop (a raylet
    restarting an agent), so this repeats until none is left, and waits for each one it kills."""
    for _ in range(3):
        ours = _processes_of(temp)
        if not ours:
            return
        for p in ours:
            with contextlib.suppress(psutil.Error):
                p.terminate()
        _, alive = psutil.wait_procs(ours, timeout=15)
        for p in alive:
            with contextlib.suppress(psutil.Error):
                p.kill()
        psutil.wait_procs(alive, timeout=15)
    leftover = [" ".join(cmdline(p)) for p in _processes_of(temp)]
    assert not leftover, leftover


def _processes_of(temp: str) -> list[psutil.Process]:
    """Live (not zombie) processes whose command line names ``temp``."""
    found = []
    for p in psutil.process_iter():
        with contextlib.suppress(psutil.Error):
            if temp in " ".join(cmdline(p)) and p.status() != psutil.STATUS_ZOMBIE:
                found.append(p)
    return found


@dataclasses.dataclass
class Started:
    """A ``kvgate`` subprocess and its stderr lines so far. A thread reads stderr as it comes, so that a
    chatty process (a Ray driver forwarding its actors' logs, a gateway's access log) never fills the
    pipe and blocks on a write while a test waits for it."""

    proc: subprocess.Popen[str]
    stderr: list[str] = dataclasses.field(default_factory=list)
    reader: threading.Thread | None = None

    def tail(self, chars: int = 2000) -> str:
        """The last ``chars`` of stderr; all of it once the process has exited (the reader catches up)."""
        if self.reader is not None and self.proc.poll() is not None:
            self.reader.join(5)
        return "".join(self.stderr)[-chars:]


@contextlib.contextmanager
def kvgate(*args: str) -> Iterator[Started]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "kvgate.cli.main", *args],
        env=ENV,
        text=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    started = Started(proc)
    started.reader = threading.Thread(
        target=lambda: started.stderr.extend(iter(proc.stderr.readline, "")), daemon=True
    )
    started.reader.start()
    try:
        yield started
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGINT)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)


def live_workers(redis_url: str) -> list:
    async def read() -> list:
        settings = IndexSettings(timeout_s=2)
        index = RedisPrefixIndex(redis_client(redis_url, settings), settings, SystemClock())
        try:
            return await index.workers()
        finally:
            await index.close()

    return asyncio.run(read())


def healthy(url: str) -> bool:
    try:
        return httpx.get(f"{url}/health", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


def gateway_state(gateway: Started, url: str) -> str:
    """What a gateway that is not healthy is doing: its exit status, or its /health; then its last stderr."""
    if gateway.proc.poll() is not None:
        return f"exited {gateway.proc.returncode}:\n{gateway.tail()}"
    try:
        reply = httpx.get(f"{url}/health", timeout=2)
        state = f"running, /health {reply.status_code}: {reply.text[:500]}"
    except httpx.HTTPError as error:
        state = f"running, /health unreachable ({error!r})"
    return f"{state}\n{gateway.tail()}"


def chat(url: str, question: str) -> dict:
    body = {
        "model": "tiny",
        "max_tokens": 4,
        "temperature": 0,
        "messages": [{"role": "system", "content": SYSTEM}, {"role": "user", "content": question}],
    }
    reply = httpx.post(f"{url}/v1/chat/completions", json=body, timeout=60)
    assert reply.status_code == 200, reply.text
    return reply.json()


def test_a_prefix_warmed_through_one_gateway_is_hit_through_another(
    tiny_chat_model: Path, private_redis: RedisServer
) -> None:
    redis_url = private_redis.url
    with (
        ray_cluster() as address,
        kvgate(
            "workers",
            "--ray-address",
            address,
            "--workers",
            "2",
            "--redis-url",
            redis_url,
            *model_args(tiny_chat_model),
            "--num-gpu-blocks",
            "64",
        ) as workers,
    ):
        wait_for(
            lambda: len(live_workers(redis_url)) == 2,
            180,
            lambda: f"workers not registered (exit status {workers.proc.poll()}):\n{workers.tail()}",
        )
        nodes = {status.info.node_id for status in live_workers(redis_url)}
        assert len(nodes) == 2  # one worker on each Ray node
        http_a, http_b, grpc_a, grpc_b = free_ports(4)  # distinct: bound at once
        url_a, url_b = f"http://127.0.0.1:{http_a}", f"http://127.0.0.1:{http_b}"
        gateways = [
            ("gateway", "--redis-url", redis_url, *model_args(tiny_chat_model),
             "--port", str(http), "--grpc-port", str(grpc))
            for http, grpc in ((http_a, grpc_a), (http_b, grpc_b))
        ]  # fmt: skip
        with kvgate(*gateways[0]) as gateway_a, kvgate(*gateways[1]) as gateway_b:
            wait_for(
                lambda: healthy(url_a) and healthy(url_b),
                180,
                lambda: f"A: {gateway_state(gateway_a, url_a)}\nB: {gateway_state(gateway_b, url_b)}",
            )
            first = chat(url_a, "Which worker holds this?")
            second = chat(url_b, "And this one?")
    assert first["usage"]["prompt_tokens_details"]["cached_tokens"] == 0
    assert second["kvgate"]["route_reason"] == "cache_hit"
    assert second["kvgate"]["worker"] == first["kvgate"]["worker"]
    assert second["usage"]["prompt_tokens_details"]["cached_tokens"] >= 128
