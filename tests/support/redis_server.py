"""A real redis-server process on a free loopback port, for tests that need one of their own
(also the building block of :mod:`tests.support.redis_cluster` and :mod:`tests.support.redis_sentinel`)."""

from __future__ import annotations

import contextlib
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    return free_ports(1)[0]


def free_ports(count: int) -> list[int]:
    """``count`` distinct TCP ports on 127.0.0.1 that were free a moment ago (all bound at once, so
    no two are the same)."""
    with contextlib.ExitStack() as stack:
        socks = [stack.enter_context(socket.socket()) for _ in range(count)]
        for sock in socks:
            sock.bind(("127.0.0.1", 0))
        return [sock.getsockname()[1] for sock in socks]


def redis_server_binary() -> str | None:
    return shutil.which("redis-server")


class RedisServer:
    """Starts ``redis-server`` without persistence; ``stop()`` kills it. Restartable on its port, with
    its folder (``dir``) kept: a cluster node keeps its ``nodes.conf``, a Sentinel its config.

    ``args`` are extra command-line options; ``config`` (text) is written to ``dir/redis.conf`` at the
    first start and given first, as redis-server wants a config file (a Sentinel needs one it can
    rewrite)."""

    def __init__(
        self, port: int | None = None, *, args: Sequence[str] = (), config: str | None = None
    ) -> None:
        binary = redis_server_binary()
        if binary is None:
            raise RuntimeError("redis-server is not installed (apt-get install -y redis-server)")
        self._binary = binary
        self.port = port or free_port()
        self.dir = Path(tempfile.mkdtemp(prefix="kvgate-redis-"))
        self._args = list(args)
        self._config = config
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self, timeout_s: float = 20.0) -> RedisServer:
        """Starts the process and waits until it answers PING; RuntimeError (with its log) if it
        exits first or does not answer within ``timeout_s``."""
        self._proc = subprocess.Popen(self._command(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            wait_for_redis(self.url, timeout_s, alive=self._alive)
        except RuntimeError as exc:
            self.stop()
            raise RuntimeError(f"{exc}\n-- redis-server log:\n{self.log_tail()}") from None
        return self

    def stop(self) -> None:
        if self._proc is not None:
            self._proc.kill()
            self._proc.wait()
            self._proc = None

    def log_tail(self, lines: int = 20) -> str:
        log = self.dir / "redis.log"
        return "\n".join(log.read_text().splitlines()[-lines:]) if log.exists() else "(no log)"

    def __enter__(self) -> RedisServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Stops the process and removes its folder."""
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)

    def _command(self) -> list[str]:
        head = [self._binary]
        if self._config is not None:
            conf = self.dir / "redis.conf"
            if not conf.exists():  # on a restart, keep what the server rewrote (a Sentinel's state)
                conf.write_text(self._config)
            head.append(str(conf))
        return [*head, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                "--dir", str(self.dir), "--logfile", str(self.dir / "redis.log"), "--loglevel", "notice",
                *self._args]  # fmt: skip

    def _alive(self) -> None:
        if self._proc is not None and self._proc.poll() is not None:
            raise RuntimeError(f"redis-server on port {self.port} exited with {self._proc.returncode}")


def wait_for_redis(url: str, timeout_s: float, alive: Callable[[], None] | None = None) -> None:
    """Blocks until ``url`` answers PING; raises RuntimeError after ``timeout_s``, or at once when
    ``alive()`` (if given) raises it (the process died)."""
    import redis  # here, not at the top: machines without redis-py (GPU boxes) still run other tests

    deadline = time.monotonic() + timeout_s
    client = redis.Redis.from_url(url, socket_timeout=0.5, socket_connect_timeout=0.5)
    try:
        while True:
            if alive is not None:
                alive()
            try:
                if client.ping():
                    return
            except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError) as exc:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"redis at {url} did not answer within {timeout_s}s") from exc
                time.sleep(0.02)
    finally:
        client.close()
