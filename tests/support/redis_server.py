"""A real redis-server process on a free loopback port, for tests that need one of their own."""

from __future__ import annotations

import shutil
import socket
import subprocess
import tempfile
import time


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def redis_server_binary() -> str | None:
    return shutil.which("redis-server")


class RedisServer:
    """Starts ``redis-server`` without persistence; ``stop()`` kills it. Restartable on its port."""

    def __init__(self, port: int | None = None) -> None:
        binary = redis_server_binary()
        if binary is None:
            raise RuntimeError("redis-server is not installed (apt-get install -y redis-server)")
        self._binary = binary
        self.port = port or free_port()
        self._dir = tempfile.mkdtemp(prefix="kvgate-redis-")
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self, timeout_s: float = 10.0) -> RedisServer:
        args = [
            self._binary,
            "--port",
            str(self.port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            self._dir,
            "--loglevel",
            "warning",
        ]
        self._proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_for_redis(self.url, timeout_s)
        return self

    def stop(self) -> None:
        if self._proc is not None:
            self._proc.kill()
            self._proc.wait()
            self._proc = None

    def __enter__(self) -> RedisServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
        shutil.rmtree(self._dir, ignore_errors=True)


def wait_for_redis(url: str, timeout_s: float) -> None:
    """Blocks until ``url`` answers PING; raises RuntimeError after ``timeout_s``."""
    import redis  # here, not at the top: machines without redis-py (GPU boxes) still run other tests

    deadline = time.monotonic() + timeout_s
    client = redis.Redis.from_url(url, socket_timeout=0.5, socket_connect_timeout=0.5)
    try:
        while True:
            try:
                if client.ping():
                    return
            except redis.exceptions.ConnectionError as exc:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"redis at {url} did not answer within {timeout_s}s") from exc
                time.sleep(0.02)
    finally:
        client.close()
