"""Fixed port ranges: the workers of one node take the first free ports from a base (gRPC and
/metrics), never share one, and a full range is a clear error."""

from __future__ import annotations

import socket

import pytest

from tests.support.real_workers import StartWorker
from tests.support.redis_server import free_port


def _free_range(n: int) -> int:
    """A base port with ``n`` free ports from it (probed; retried on collision)."""
    for _ in range(50):
        base = free_port()
        if base + n < 65536 and all(_free(base + i) for i in range(n)):
            return base
    raise AssertionError("no free port range")


def _free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


async def test_workers_of_a_node_take_consecutive_ports_from_the_bases(start_worker: StartWorker) -> None:
    grpc_base, metrics_base = _free_range(3), _free_range(3)
    span = {"port_span": 3, "port": grpc_base, "metrics_port": metrics_base}
    first = await start_worker(worker_id="worker-0", **span)
    second = await start_worker(worker_id="worker-1", **span)
    assert (first.port, second.port) == (grpc_base, grpc_base + 1)
    assert first.info.metrics_address == f"127.0.0.1:{metrics_base}"
    assert second.info.metrics_address == f"127.0.0.1:{metrics_base + 1}"


async def test_a_full_port_range_is_a_clear_error(start_worker: StartWorker) -> None:
    base = _free_range(1)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", base))
        taken.listen()
        with pytest.raises(RuntimeError, match=f"no free port in {base}..{base}"):
            await start_worker(port=base, port_span=1)
