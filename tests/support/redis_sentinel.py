"""A real Sentinel deployment on free loopback ports: a primary, one replica and one Sentinel
(quorum 1) watching them, fast enough to fail over within seconds in a test."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tests.support.polling import poll_until, start_with_retries
from tests.support.redis_server import RedisServer, free_ports

if TYPE_CHECKING:
    import redis

SERVICE = "kvgate"
# A primary waits 5 s by default before a diskless full sync, for more replicas to join it.
_NO_SYNC_DELAY = ["--repl-diskless-sync-delay", "0"]


class LocalSentinel:
    """``start()`` returns once the replica is in sync and the Sentinel knows both the primary and
    the replica; ``stop()`` kills all three and removes their folders.

    ``down_after_ms`` is how long the primary may be silent before the Sentinel fails over: short for a
    failover test, long where a busy machine must never trigger one by accident."""

    def __init__(self, service: str = SERVICE, down_after_ms: int = 5000) -> None:
        self.service = service
        self._down_after_ms = down_after_ms
        self.servers: list[RedisServer] = []  # primary at start, replica, sentinel

    @property
    def sentinel_url(self) -> str:
        """``redis+sentinel://127.0.0.1:PORT/SERVICE/0`` (see :mod:`kvgate.index.redis_url`)."""
        return f"redis+sentinel://127.0.0.1:{self.sentinel.port}/{self.service}/0"

    @property
    def sentinel(self) -> RedisServer:
        return self.servers[2]

    def primary_port(self) -> int:
        """The primary's port as the Sentinel reports it now."""
        with _client(self.sentinel.port) as client:
            _host, port = client.sentinel_get_master_addr_by_name(self.service)
        return int(port)

    def start(self, timeout_s: float = 60.0, attempts: int = 2) -> LocalSentinel:
        """Starts the three processes and waits until they are ready; on failure (a port taken
        meanwhile, say) retries on fresh ports, then raises RuntimeError with what went wrong."""
        return start_with_retries(lambda: self._start_once(timeout_s), self.stop, attempts)

    def stop(self) -> None:
        for server in self.servers:
            server.close()
        self.servers = []

    def kill_primary(self, timeout_s: float = 60.0) -> int:
        """Kills the current primary and waits until the Sentinel has promoted the replica and the
        replica says it is the primary; returns the new primary's port. The old primary stays down."""
        old = self.primary_port()
        next(s for s in self.servers if s.port == old).stop()
        new = poll_until(lambda: (p := self.primary_port()) != old and p, timeout_s,
                         f"the Sentinel to fail over from port {old}")  # fmt: skip
        poll_until(lambda: _role(new) == "master", timeout_s, f"port {new} to become the primary")
        return new

    def __enter__(self) -> LocalSentinel:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _start_once(self, timeout_s: float) -> LocalSentinel:
        primary_port, replica_port, sentinel_port = free_ports(3)
        primary = RedisServer(primary_port, args=_NO_SYNC_DELAY)
        replica = RedisServer(
            replica_port, args=[*_NO_SYNC_DELAY, "--replicaof", "127.0.0.1", str(primary_port)]
        )
        sentinel = RedisServer(sentinel_port, args=["--sentinel"], config=self._config(primary_port))
        self.servers = [primary, replica, sentinel]
        for server in self.servers:
            server.start(timeout_s)
        self._wait_ready(primary_port, replica_port, timeout_s)
        return self

    def _config(self, primary_port: int) -> str:
        name = self.service
        return (f"sentinel monitor {name} 127.0.0.1 {primary_port} 1\n"
                f"sentinel down-after-milliseconds {name} {self._down_after_ms}\n"
                f"sentinel failover-timeout {name} 3000\n")  # fmt: skip

    def _wait_ready(self, primary_port: int, replica_port: int, timeout_s: float) -> None:
        poll_until(lambda: _link_up(replica_port), timeout_s, f"replica {replica_port} to sync")
        poll_until(lambda: self.primary_port() == primary_port, timeout_s, "the Sentinel to see the primary")
        poll_until(lambda: self._knows_replica(replica_port), timeout_s, "the Sentinel to see the replica")

    def _knows_replica(self, port: int) -> bool:
        with _client(self.sentinel.port) as client:
            replicas = client.sentinel_slaves(self.service)
        return any(r["port"] == port and not r["is_sdown"] and not r["is_odown"] for r in replicas)


def _link_up(port: int) -> bool:
    with _client(port) as client:
        return client.info("replication").get("master_link_status") == "up"


def _role(port: int) -> str:
    with _client(port) as client:
        return client.info("replication")["role"]


def _client(port: int) -> redis.Redis:
    import redis  # here, not at the top: machines without redis-py (GPU boxes) still import this

    return redis.Redis(port=port, socket_timeout=2.0, socket_connect_timeout=2.0, decode_responses=True)
