"""A real Redis Cluster of masters without replicas on free loopback ports, for the tests of the
cluster topology. Each node is a :class:`RedisServer` in its own folder (its ``nodes.conf`` lives
there, so a stopped node restarts as the same node, owning the same slots, with no data)."""

from __future__ import annotations

import shutil
import subprocess
from typing import TYPE_CHECKING

from tests.support.polling import poll_until, start_with_retries
from tests.support.redis_server import RedisServer, free_ports

if TYPE_CHECKING:
    import redis

# A node is marked failing after this long unreachable; generous, so a busy machine never trips it.
NODE_TIMEOUT_MS = 5000


class LocalRedisCluster:
    """``masters`` nodes (3 by default), slots spread evenly by ``redis-cli --cluster create``.

    ``start()`` returns once every node reports ``cluster_state:ok``; ``stop()`` kills every node and
    removes their folders. Cluster mode has only database 0, so every URL ends in ``/0``."""

    def __init__(self, masters: int = 3) -> None:
        if shutil.which("redis-cli") is None:
            raise RuntimeError("redis-cli is not installed (apt-get install -y redis-tools)")
        self._count = masters
        self.nodes: list[RedisServer] = []

    @property
    def urls(self) -> list[str]:
        return [node.url for node in self.nodes]

    @property
    def url(self) -> str:
        """One node's URL: a cluster-aware client discovers the others from it."""
        return self.urls[0]

    def start(self, timeout_s: float = 60.0, attempts: int = 2) -> LocalRedisCluster:
        """Starts the nodes and forms the cluster; on failure (a port taken meanwhile, say) retries
        on fresh ports, then raises RuntimeError with what went wrong."""
        return start_with_retries(lambda: self._start_once(timeout_s), self.stop, attempts)

    def stop(self) -> None:
        for node in self.nodes:
            node.close()
        self.nodes = []

    def flushall(self) -> None:
        """Empties every master (data only; loaded scripts stay)."""
        for node in self.nodes:
            with _client(node.port) as client:
                client.flushall()

    def stop_node(self, index: int) -> None:
        """Kills node ``index`` (its slots become unreachable; the cluster marks it failing only
        after ``NODE_TIMEOUT_MS``)."""
        self.nodes[index].stop()

    def restart_node(self, index: int, timeout_s: float = 60.0) -> None:
        """Restarts node ``index`` on its port, empty (no data, no scripts) but owning its slots, and
        waits until the whole cluster is ok again."""
        self.nodes[index].start(timeout_s)
        self.wait_ok(timeout_s)

    def wait_ok(self, timeout_s: float = 60.0) -> None:
        """Waits until every node reports ``cluster_state:ok`` and knows every node."""
        for node in self.nodes:
            poll_until(lambda port=node.port: _cluster_ok(port, self._count), timeout_s,
                       f"cluster node 127.0.0.1:{node.port} to report cluster_state:ok")  # fmt: skip

    def __enter__(self) -> LocalRedisCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _start_once(self, timeout_s: float) -> LocalRedisCluster:
        ports = free_ports(2 * self._count)  # a client port and a cluster-bus port per node
        self.nodes = [_node(port, bus) for port, bus in zip(ports[::2], ports[1::2], strict=True)]
        for node in self.nodes:
            node.start(timeout_s)
        _create(self.nodes, timeout_s)
        self.wait_ok(timeout_s)
        return self


def _node(port: int, bus_port: int) -> RedisServer:
    # An explicit bus port: the default (port + 10000) is past 65535 for high ephemeral ports.
    args = ["--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
            "--cluster-port", str(bus_port), "--cluster-node-timeout", str(NODE_TIMEOUT_MS)]  # fmt: skip
    return RedisServer(port, args=args)


def _create(nodes: list[RedisServer], timeout_s: float) -> None:
    addresses = [f"127.0.0.1:{node.port}" for node in nodes]
    command = ["redis-cli", "--cluster", "create", *addresses, "--cluster-replicas", "0", "--cluster-yes"]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired as exc:
        raise RuntimeError(f"redis-cli --cluster create took more than {timeout_s}s") from exc
    if done.returncode != 0:
        raise RuntimeError(f"redis-cli --cluster create failed:\n{done.stdout}\n{done.stderr}")


def _cluster_ok(port: int, count: int) -> bool:
    with _client(port) as client:
        info = client.cluster("INFO")
    return info.get("cluster_state") == "ok" and int(info.get("cluster_known_nodes", 0)) == count


def _client(port: int) -> redis.Redis:
    import redis  # here, not at the top: machines without redis-py (GPU boxes) still import this

    return redis.Redis(port=port, socket_timeout=2.0, socket_connect_timeout=2.0, decode_responses=True)
