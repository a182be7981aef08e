"""Hostile clients against a real ``kvgate gateway`` process (scripted workers, real Redis): bodies
just under the default size limit must not freeze it or keep its memory, and connections that send
their headers a byte at a time must neither block others nor outlive the header timeout."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Iterator

import httpx
import pytest

from kvgate.gateway.settings import Limits
from tests.support.redis_server import RedisServer
from tests.system.gateway_process import GatewayProcess, gateway_over_scripted_workers, wait_until

pytestmark = [pytest.mark.slow, pytest.mark.redis]
HEADER_TIMEOUT_S = 2.0
LIMIT = Limits().max_body_bytes  # the default: these tests run against it, not a test-sized one


@pytest.fixture(scope="module")
def gateway() -> Iterator[GatewayProcess]:
    with (
        RedisServer() as redis,
        gateway_over_scripted_workers(redis.url, "--header-timeout", str(HEADER_TIMEOUT_S)) as running,
    ):
        yield running


def just_under_the_limit(model: str, kind: str) -> bytes:
    """A chat body of ``kind`` (one long message, or as many tiny ones as fit) within 8 KiB of the limit."""
    if kind == "long text":
        head = json.dumps({"model": model, "messages": [{"role": "user", "content": ""}]}).encode()
        return head.replace(b'""', b'"' + b"lorem ipsum " * ((LIMIT - len(head) - 2048) // 12) + b'"')
    item = b'{"role": "user", "content": "hi"}, '
    count = (LIMIT - 2048) // len(item)
    return (
        b'{"model": "'
        + model.encode()
        + b'", "messages": ['
        + item * count
        + b'{"role": "user", "content": "hi"}]}'
    )


class HealthProbe:
    """Polls ``/health`` from a thread of its own every 50 ms; records the slowest answer."""

    def __init__(self, base: str) -> None:
        self._base = base
        self.slowest_s = 0.0
        self.answers = 0
        self.failures: list[str] = []  # anything but a 200, or no answer
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> HealthProbe:
        self._thread.start()
        wait_until(lambda: self.answers > 0, timeout_s=30)  # probing before the test goes on
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        with httpx.Client(base_url=self._base, timeout=30) as http:
            while not self._stop.is_set():
                started = time.monotonic()
                try:
                    status = http.get("/health").status_code
                except httpx.HTTPError as exc:
                    status = repr(exc)
                if status != 200:
                    self.failures.append(str(status))
                self.slowest_s = max(self.slowest_s, time.monotonic() - started)
                self.answers += 1
                self._stop.wait(0.05)


@pytest.mark.parametrize("kind", ["long text", "many messages"])
def test_a_body_just_under_the_limit_neither_freezes_the_gateway_nor_keeps_its_memory(
    gateway: GatewayProcess, kind: str
) -> None:
    model = gateway.model()
    body = just_under_the_limit(model, kind)
    assert LIMIT - 8192 <= len(body) <= LIMIT
    headers = {"content-type": "application/json"}
    before = gateway.rss_mib()
    with HealthProbe(gateway.base) as probe, httpx.Client(base_url=gateway.base, timeout=60) as http:
        for _ in range(3):
            started = time.monotonic()
            reply = http.post("/v1/chat/completions", content=body, headers=headers)
            assert reply.status_code == 400, reply.text[
                :300
            ]  # too long for the context, or too many messages
            assert time.monotonic() - started < 10.0  # refused within seconds, even on a busy 2-core machine
    assert probe.failures == []
    assert probe.slowest_s < 1.0
    assert gateway.rss_mib() - before < 256
    normal = {"model": model, "messages": [{"role": "user", "content": "hello"}], "max_tokens": 2}
    assert httpx.post(f"{gateway.base}/v1/chat/completions", json=normal, timeout=30).status_code == 200


async def _trickle(port: int, closed_after: list[float]) -> None:
    """Opens a connection and sends a request's headers one byte every 0.2 s until the server closes
    it; records how long it stayed open."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    opened = time.monotonic()
    head = b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"a" * 10_000
    try:
        for byte in head:
            writer.write(bytes([byte]))
            await writer.drain()
            try:
                if await asyncio.wait_for(reader.read(1), 0.2) == b"":
                    break  # closed by the server
            except TimeoutError:
                continue
    except ConnectionError:
        pass
    closed_after.append(time.monotonic() - opened)
    writer.close()


async def _slowloris_and_one_request(gateway: GatewayProcess) -> tuple[list[float], int, float]:
    closed_after: list[float] = []
    trickles = [asyncio.create_task(_trickle(gateway.port, closed_after)) for _ in range(64)]
    await asyncio.sleep(0.5)  # let them all connect and start trickling
    body = {"model": gateway.model(), "messages": [{"role": "user", "content": "hello"}], "max_tokens": 2}
    async with httpx.AsyncClient(base_url=gateway.base, timeout=30) as http:
        started = time.monotonic()
        status = (await http.post("/v1/chat/completions", json=body)).status_code
        took = time.monotonic() - started
    async with asyncio.timeout(60):
        await asyncio.gather(*trickles)
    return closed_after, status, took


def test_64_connections_sending_headers_byte_by_byte_block_no_one_and_are_closed_at_the_timeout(
    gateway: GatewayProcess,
) -> None:
    closed_after, status, took = asyncio.run(_slowloris_and_one_request(gateway))
    assert status == 200
    assert took < 5.0  # served while 64 connections trickle
    assert len(closed_after) == 64
    assert max(closed_after) < HEADER_TIMEOUT_S + 3.0  # each cut off at the timeout, not left open
