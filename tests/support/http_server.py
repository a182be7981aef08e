"""Serve an ASGI app with uvicorn on a free loopback port, inside the test's event loop."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import uvicorn

from tests.support.redis_server import free_port


@contextlib.asynccontextmanager
async def serve(app: object, timeout_s: float = 10.0) -> AsyncIterator[str]:
    """Yields the base URL while the server runs; stops it (lifespan shutdown included) after."""
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
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
