"""Worker records forged in Redis, against real processes: ``kvgate gateway`` and a worker process
(scripted workers, registered and signed as real ones are) share a real Redis; an attacker who can
write to Redis but lacks the deployment secret registers records pointing at its own listener.

The gateway must refuse them: the listener sees no connection, while every request succeeds."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import socket
import threading

import httpx
import pytest

from kvgate.common.clock import SystemClock
from kvgate.index import IndexSettings, RedisPrefixIndex, redis_client
from kvgate.proto.ids import WorkerId
from kvgate.proto.trust import sign_record
from kvgate.proto.workers import WorkerInfo, WorkerLoad
from tests.support.redis_server import RedisServer
from tests.system.gateway_process import gateway_over_scripted_workers, wait_until

pytestmark = [pytest.mark.slow, pytest.mark.redis]
IDLE = WorkerLoad(gpu_blocks_total=100, gpu_blocks_free=100)


class Listener:
    """A TCP listener on loopback that counts the connections it accepts (and closes them)."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.sock.settimeout(0.2)
        self.address = f"127.0.0.1:{self.sock.getsockname()[1]}"
        self.accepted = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            with contextlib.suppress(TimeoutError, OSError):
                conn, _ = self.sock.accept()
                self.accepted += 1
                conn.close()

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        self.sock.close()


async def forge(redis_url: str, listener: Listener) -> list[WorkerInfo]:
    """Registers two forged records beside the genuine one, both idle, both at ``listener``: one
    unsigned, one with the genuine record's signature; live for minutes (no heartbeat needed)."""
    settings = IndexSettings(heartbeat_ttl_s=600.0)
    index = RedisPrefixIndex(redis_client(redis_url, settings), settings, SystemClock())
    try:
        (genuine,) = [s.info for s in await index.workers()]
        copied = dataclasses.replace(genuine, worker_id=WorkerId("forged-copy"), address=listener.address)
        unsigned = sign_record(dataclasses.replace(copied, worker_id=WorkerId("forged-unsigned")), b"")
        wrong_key = sign_record(dataclasses.replace(copied, worker_id=WorkerId("forged-key")), b"x" * 32)
        for record in (copied, unsigned, wrong_key):
            await index.register(record, IDLE)
        return [copied, unsigned, wrong_key]
    finally:
        await index.close()


def test_a_record_forged_without_the_signing_key_receives_no_request(private_redis: RedisServer) -> None:
    listener = Listener()
    try:
        with gateway_over_scripted_workers(private_redis.url) as gateway:
            forged = asyncio.run(forge(private_redis.url, listener))
            # the gateway has read them all, whether it routes to them or refuses them
            wait_until(lambda: (h := gateway.health()) and h["workers"] + h.get("refused_workers", 0) == 4)
            model = gateway.model()
            statuses = [
                httpx.post(f"{gateway.base}/v1/completions", timeout=60,
                           json={"model": model, "prompt": f"request {i}: " + "word " * 40, "max_tokens": 2}
                           ).status_code
                for i in range(24)
            ]  # fmt: skip
            refused = gateway.health()["refused_workers"]
    finally:
        listener.close()
    assert listener.accepted == 0
    assert statuses == [200] * 24
    assert refused == len(forged)
