"""``kvgate up`` as a subprocess on free loopback ports, with its own Ray temp dir, for the cluster tests:
start it, read its stderr as it comes, wait for /health, stop it with SIGINT, find what it left."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable

import httpx
import psutil

from tests.support.redis_server import free_port

WORKER_LINE = re.compile(r"worker (\S+) (up|restarted) at (\S+) \(epoch (\d+)\)")


SECRET = "cluster-tests-secret-0123456789"
READY_S = 180.0
"""How long a started ``kvgate up`` gets to answer /health. Ray's start, each worker process's imports
and its model build are CPU-bound: alone on 2 cores they take 20-40 s; with both cores busy elsewhere
(two spinning processes) Ray took 40-55 s to start the worker processes, which took 40 s more to build
a tiny model, and /health answered after 89-97 s."""


class UpProcess:
    """One ``kvgate up`` run. ``args``: extra flags (the ports and the Ray temp dir are added here).
    The Ray temp dir is short (Ray's Unix socket paths must stay under 108 bytes) and private, so that
    every process this run started can be found by it afterwards. Alone on this machine it runs as the
    README's one command does, without ``$KVGATE_HASH_SECRET`` (it makes up its own); with Redis it is
    given one, as a deployment must."""

    def __init__(self, args: list[str]) -> None:
        self.port, self.grpc_port = free_port(), free_port()
        self.ray_dir = tempfile.mkdtemp(prefix="kvr-", dir="/tmp")
        command = [sys.executable, "-m", "kvgate.cli.main", "up", *args, "--port", str(self.port),
                   "--grpc-port", str(self.grpc_port), "--ray-temp-dir", self.ray_dir]  # fmt: skip
        env = {k: v for k, v in os.environ.items() if k not in ("KVGATE_HASH_SECRET", "KVGATE_REDIS_URL")}
        env["RAY_USAGE_STATS_ENABLED"] = "0"
        if "--redis-url" in args:
            env["KVGATE_HASH_SECRET"] = SECRET
        self.proc = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
        )
        self.stderr: list[str] = []
        self.stdout: list[str] = []
        self._readers = [
            self._drain(self.proc.stderr, self.stderr),
            self._drain(self.proc.stdout, self.stdout),
        ]

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def wait_healthy(self, timeout_s: float) -> None:
        """Until /health answers 200 (a worker is routable); AssertionError with stderr if not."""
        wait_for(lambda: self.proc.poll() is None and self._healthy(), timeout_s, self.log)

    def workers(self) -> list[tuple[str, str, str, int]]:
        """(worker id, "up" | "restarted", address, epoch) for every incarnation reported so far."""
        found = (WORKER_LINE.search(line) for line in list(self.stderr))
        return [(m[1], m[2], m[3], int(m[4])) for m in found if m]

    def actor_processes(self) -> list[psutil.Process]:
        """The worker actors' processes (Ray names them after the class)."""
        return [p for p in self._descendants() if "WorkerActor" in " ".join(cmdline(p))]

    def interrupt(self, timeout_s: float = 120.0) -> int:
        """SIGINT, as Ctrl-C would; returns the exit status. The default wait is above the stack's own
        bounds on a clean stop (the gateway's 30 s grace, then 15 s for the workers to stop, then Ray's
        shutdown), so a slow machine's clean stop passes; AssertionError with the log if it is exceeded."""
        self.proc.send_signal(signal.SIGINT)
        try:
            return self.proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"still running {timeout_s} s after SIGINT:\n{self.log()}") from None
        finally:
            for reader in self._readers:
                reader.join(5)

    def leftovers(self) -> list[str]:
        """Command lines of live processes that mention this run's Ray temp dir."""
        return [" ".join(c) for p in psutil.process_iter() if self.ray_dir in " ".join(c := cmdline(p))]

    def kill(self) -> None:
        """Last resort after a failed test: the process tree, by pid."""
        for p in [*self._descendants(), psutil.Process(self.proc.pid)]:
            with contextlib.suppress(psutil.Error):
                p.kill()

    def log(self) -> str:
        return "".join(self.stderr[-40:])

    def _healthy(self) -> bool:
        try:
            return httpx.get(f"{self.base_url}/health", timeout=2).status_code == 200
        except httpx.HTTPError:
            return False

    def _descendants(self) -> list[psutil.Process]:
        with contextlib.suppress(psutil.Error):
            return psutil.Process(self.proc.pid).children(recursive=True)
        return []

    @staticmethod
    def _drain(stream, lines: list[str]) -> threading.Thread:
        thread = threading.Thread(target=lambda: lines.extend(iter(stream.readline, "")), daemon=True)
        thread.start()
        return thread


def wait_for(check: Callable[[], object], timeout_s: float, describe: Callable[[], str] = str) -> object:
    """Polls ``check`` until truthy (returned); AssertionError with ``describe()`` after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while not (value := check()):
        if time.monotonic() > deadline:
            raise AssertionError(f"not true after {timeout_s} s:\n{describe()}")
        time.sleep(0.2)
    return value


def cmdline(p: psutil.Process) -> list[str]:
    with contextlib.suppress(psutil.Error):
        return p.cmdline()
    return []
