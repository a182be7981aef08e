"""What cannot work fails at once, in one line that says what to do: ``kvgate up`` with a Redis that
does not answer, or with a busy port, stops before Ray starts or the model loads; ``kvgate index``
pointed at something that is not Redis says so. Real processes (``python -m kvgate.cli.main``, so the
code under test is this checkout's), real sockets."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator

import pytest
from redis.asyncio.connection import Connection

from kvgate.cluster.preflight import check_redis
from kvgate.common.clock import SystemClock
from kvgate.index import IndexSettings, IndexUnavailableError, RedisPrefixIndex, redis_client
from kvgate.index.redis_url import mask_url
from tests.support.redis_server import free_port

SECRET = "startup-check-tests-secret-0123456789"


def kvgate(*args: str, timeout_s: float = 60) -> tuple[subprocess.CompletedProcess[str], float]:
    """Runs the command; returns it and its wall time."""
    env = {k: v for k, v in os.environ.items() if k != "KVGATE_REDIS_URL"}
    env |= {"KVGATE_HASH_SECRET": SECRET, "RAY_USAGE_STATS_ENABLED": "0"}
    start = time.monotonic()
    out = subprocess.run([sys.executable, "-m", "kvgate.cli.main", *args],
                         capture_output=True, text=True, timeout=timeout_s, env=env)  # fmt: skip
    return out, time.monotonic() - start


def assert_one_line_error(out: subprocess.CompletedProcess[str], rc: int, *parts: str) -> None:
    text = out.stdout + out.stderr
    assert out.returncode == rc, text
    assert "Traceback" not in text
    assert "kvgate is ready" not in text
    assert "Ray" not in out.stderr  # failed before Ray started
    error = [line for line in text.splitlines() if "error" in line or "unavailable" in line]
    assert len(error) == 1, text
    for part in parts:
        assert part in error[0], error[0]


@pytest.fixture
def busy_port() -> Iterator[int]:
    """A port something listens on for the test's duration."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield sock.getsockname()[1]


# redis-py speaks RESP3 by default from 8.0: its handshake (HELLO) is the first reply it reads
_RESP3 = str(getattr(Connection(), "protocol", 2)) == "3"


class NotRedis:
    """A TCP listener that answers every read with ``reply`` (a protocol other than Redis's, or a
    RESP reply no Redis would send to that command)."""

    def __init__(self, reply: bytes) -> None:
        self.reply = reply
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._answer, args=(conn,), daemon=True).start()

    def _answer(self, conn: socket.socket) -> None:
        with conn:
            try:
                while data := conn.recv(4096):
                    conn.sendall(self.reply * _commands(data))
            except OSError:
                pass


def _commands(data: bytes) -> int:
    """How many RESP commands ``data`` holds (a client may send several in one packet, and waits for
    a reply to each); 1 for anything else."""
    return max(1, sum(1 for line in data.split(b"\r\n") if line.startswith(b"*")))


def test_up_with_a_redis_that_does_not_answer_fails_before_ray_naming_the_url() -> None:
    port = free_port()  # nothing listens
    url = f"redis://:hunter2@127.0.0.1:{port}/0"
    out, took = kvgate("up", "--redis-url", url, "--port", str(free_port()), "--grpc-port", str(free_port()))
    assert_one_line_error(out, 2, f"Redis at redis://:***@127.0.0.1:{port}/0 is unavailable", "--redis-url")
    assert "hunter2" not in out.stdout + out.stderr
    assert took < 30  # the probe's wait (5 s) and Python's start-up, no model load


def test_up_with_a_busy_http_port_fails_before_ray(busy_port: int) -> None:
    out, took = kvgate("up", "--port", str(busy_port), "--grpc-port", str(free_port()))
    assert_one_line_error(out, 2, f"HTTP port 127.0.0.1:{busy_port} is already in use", "--port")
    assert took < 30


def test_up_with_a_busy_grpc_port_fails_before_ray(busy_port: int) -> None:
    out, _ = kvgate("up", "--port", str(free_port()), "--grpc-port", str(busy_port))
    assert_one_line_error(out, 2, f"gRPC port 127.0.0.1:{busy_port} is already in use", "--grpc-port")


def test_gateway_with_a_busy_port_fails_at_once(busy_port: int) -> None:
    url = f"redis://127.0.0.1:{free_port()}/0"
    out, _ = kvgate("gateway", "--redis-url", url, "--port", str(busy_port), "--grpc-port", str(free_port()))
    assert_one_line_error(out, 2, f"HTTP port 127.0.0.1:{busy_port} is already in use")


@pytest.mark.parametrize(
    ("reply", "cause"),
    [
        (b"SSH-2.0-OpenSSH_9.6\r\n", "Protocol Error"),  # another protocol altogether
        # RESP, but an integer where HELLO answers a map (RESP3 clients) or INFO answers text
        (b":1\r\n", "connection handshake" if _RESP3 else "INFO"),
        # RESP, OK to everything: to HELLO (RESP3 clients), else to PING
        (b"+OK\r\n", "connection handshake" if _RESP3 else "PING other than PONG"),
    ],
)
def test_index_against_a_listener_that_is_not_redis_is_one_clear_line(reply: bytes, cause: str) -> None:
    listener = NotRedis(reply)
    try:
        url = f"redis://127.0.0.1:{listener.port}/0"
        out, _ = kvgate("index", "--redis-url", url, "--timeout", "1")
    finally:
        listener.sock.close()
    assert_one_line_error(out, 1, f"Redis at {url} is unavailable", "not speak the Redis protocol", cause)


async def test_a_redis_index_that_stops_answering_names_its_url_not_a_repr() -> None:
    url = f"redis://:hunter2@127.0.0.1:{free_port()}/0"  # nothing listens
    settings = IndexSettings(timeout_s=0.5)
    index = RedisPrefixIndex(redis_client(url, settings), settings, SystemClock(), url=url)
    try:
        with pytest.raises(IndexUnavailableError) as caught:
            await index.workers()
    finally:
        await index.close()
    assert str(caught.value).startswith(f"Redis at {mask_url(url)} is unavailable: ")
    assert "hunter2" not in str(caught.value)


@pytest.mark.redis
def test_the_redis_check_passes_on_a_redis_that_answers(redis_url: str) -> None:
    check_redis(redis_url, wait_s=0)  # returns, raises nothing
