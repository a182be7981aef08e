"""Serve an ASGI app with uvicorn on a free loopback port, inside the test's event loop."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import uvicorn

from kvgate.gateway.http_api.server import http_config
from kvgate.gateway.settings import HttpTimeouts
from tests.support.redis_server import free_port


@contextlib.asynccontextmanager
async def serve(
    app: object, timeout_s: float = 10.0, timeouts: HttpTimeouts | None = None
) -> AsyncIterator[str]:
    """Yields the base URL while the server runs (the gateway's HTTP server, with ``timeouts``);
    stops it (lifespan shutdown included) after."""
    port = free_port()
    config = http_config(app, "127.0.0.1", port, timeouts or HttpTimeouts(), log_level="warning")
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve())
    async with asyncio.timeout(timeout_s):
        while not server.started:
            if task.done():
                task.result()
            await asyncio.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        await task
