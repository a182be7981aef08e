"""Slow clients, over real sockets against a real gateway: headers that never finish are cut off at the
header timeout, a body that trickles in gets a 408, and slow uploads hold no in-flight slot."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator

import httpx
import pytest

from kvgate.common.tokenizer import Tokenizer
from kvgate.gateway.settings import HttpTimeouts
from tests.support.live_gateway import MODEL, LiveGateway, running_gateway

FAST = HttpTimeouts(header_s=0.5, body_s=0.5, min_body_rate=1000, keep_alive_s=5.0)
CHAT = {"model": MODEL, "messages": [{"role": "user", "content": "hello"}], "max_tokens": 2}


@pytest.fixture
async def strict(tokenizer: Tokenizer) -> AsyncIterator[LiveGateway]:
    async with running_gateway(tokenizer, http_timeouts=FAST, max_concurrent_requests=2) as gateway:
        yield gateway


async def connect(live: LiveGateway) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    port = int(live.url.rsplit(":", 1)[1])
    return await asyncio.open_connection("127.0.0.1", port)


async def closed_within(reader: asyncio.StreamReader, timeout_s: float) -> bytes:
    """Everything the server sent until it closed the connection (TimeoutError if it did not)."""
    async with asyncio.timeout(timeout_s):
        return await reader.read()


def upload_head(length: int) -> bytes:
    return (f"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            f"Content-Length: {length}\r\n\r\n").encode()  # fmt: skip


async def test_headers_that_never_finish_are_cut_off_at_the_header_timeout(strict: LiveGateway) -> None:
    silent = await connect(strict)  # sends nothing at all
    partial = await connect(strict)
    partial[1].write(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n")  # never the blank line
    await partial[1].drain()
    started = time.monotonic()
    for reader, _ in (silent, partial):
        assert await closed_within(reader, 10.0) == b""
    assert time.monotonic() - started < 5.0  # the timeout is 0.5 s: well before the generous bound
    for _, writer in (silent, partial):
        writer.close()


async def test_headers_trickling_in_are_cut_off_even_while_bytes_keep_coming(strict: LiveGateway) -> None:
    reader, writer = await connect(strict)
    started = time.monotonic()
    with contextlib.suppress(ConnectionError):
        for byte in b"POST /v1/chat/completions HTTP/1.1\r\nX-Slow: " + b"a" * 1000:
            writer.write(bytes([byte]))
            await writer.drain()
            if reader.at_eof():
                break
            await asyncio.sleep(0.05)
    assert await closed_within(reader, 10.0) == b""
    assert time.monotonic() - started < 5.0
    writer.close()


async def test_a_body_that_trickles_in_gets_a_408(strict: LiveGateway) -> None:
    reader, writer = await connect(strict)
    writer.write(upload_head(10_000) + b'{"model": ')  # then nothing: far below 1000 bytes/s
    await writer.drain()
    answer = await closed_within(reader, 10.0)
    assert answer.startswith(b"HTTP/1.1 408")
    body = json.loads(answer.split(b"\r\n\r\n", 1)[1])
    assert body["error"]["code"] == "body_too_slow"
    writer.close()


async def test_slow_uploads_hold_no_in_flight_slot(tokenizer: Tokenizer) -> None:
    """Four uploads in progress (a body timeout long enough that they are), with room for two
    generations: a complete request is still served."""
    patient = HttpTimeouts(header_s=30.0, body_s=30.0, min_body_rate=1000)
    async with running_gateway(tokenizer, http_timeouts=patient, max_concurrent_requests=2) as live:
        uploads = [await connect(live) for _ in range(4)]
        for _, writer in uploads:
            writer.write(upload_head(10_000) + b'{"model": ')
            await writer.drain()
        async with httpx.AsyncClient(base_url=live.url, timeout=10) as http:
            reply = await http.post("/v1/chat/completions", json=CHAT)
        assert reply.status_code == 200, reply.text
        assert live.gateway.gate.in_flight == 0
        for _, writer in uploads:
            writer.close()


async def trickle_until_closed(writer: asyncio.StreamWriter, reader: asyncio.StreamReader) -> bytes:
    """Keeps sending a byte every 0.1 s until the server closes the connection; what it answered."""
    answer = b""
    async with asyncio.timeout(20):
        while True:
            try:
                writer.write(b" ")
                await writer.drain()
            except ConnectionError:
                return answer
            try:
                chunk = await asyncio.wait_for(reader.read(65536), 0.1)
            except TimeoutError:
                continue
            except ConnectionError:
                return answer
            if chunk == b"":
                return answer
            answer += chunk


@pytest.mark.parametrize("declared", [10_000_000_000, 10_000], ids=["too-large", "too-slow"])
async def test_a_refused_body_cannot_keep_its_connection_by_trickling_on(
    strict: LiveGateway, declared: int
) -> None:
    """Answered before its body was complete (413 at once, or 408 when too slow), a request whose client
    keeps trickling bytes loses its connection soon after: it cannot hold it for as long as it likes."""
    reader, writer = await connect(strict)
    writer.write(upload_head(declared) + b'{"model": ')
    await writer.drain()
    started = time.monotonic()
    answer = await trickle_until_closed(writer, reader)
    assert answer.startswith(b"HTTP/1.1 413" if declared > 10**9 else b"HTTP/1.1 408")
    assert time.monotonic() - started < 10.0  # the answer, then the linger (2 s): not the trickle's 20 s
    writer.close()
