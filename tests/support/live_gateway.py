"""Shared fixtures ``live``: a real gateway (HTTP on loopback) over scripted gRPC workers and the default
model's tokenizer, and ``grpc_target``: its gRPC front. Registered for every test by
``tests/conftest.py``. :func:`running_gateway` starts the same with other settings (API keys, limits),
:func:`grpc_front` the gRPC front of any of them."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pytest

from kvgate.common.clock import SystemClock
from kvgate.common.tokenizer import Tokenizer
from kvgate.gateway.compose import Gateway, build_gateway
from kvgate.gateway.grpc_api.server import build_grpc_server
from kvgate.gateway.settings import GatewaySettings, Limits
from kvgate.index import IndexSettings, MemoryPrefixIndex
from kvgate.proto.ids import WorkerId
from kvgate.proto.layout import CacheLayout
from tests.support.http_server import serve
from tests.support.scripted_worker import ScriptedWorker

MODEL = "smollm2"
CACHE = CacheLayout("HuggingFaceTB/SmolLM2-135M-Instruct")
LIMITS = Limits(context_window=4096, max_output_tokens=512, max_body_bytes=256 * 1024, request_timeout_s=30)


@dataclass
class LiveGateway:
    url: str
    gateway: Gateway
    workers: list[ScriptedWorker]
    index: MemoryPrefixIndex


@contextlib.asynccontextmanager
async def running_gateway(tokenizer: Tokenizer, **settings: Any) -> AsyncIterator[LiveGateway]:
    """A gateway over two scripted workers, with ``settings`` on top of this module's defaults."""
    index = MemoryPrefixIndex(IndexSettings(), SystemClock())
    workers = [await ScriptedWorker(WorkerId(f"w{i}"), CACHE, index).start() for i in range(2)]
    config = GatewaySettings(**({"model_name": MODEL, "cache": CACHE, "limits": LIMITS} | settings))
    gateway = build_gateway(config, index, tokenizer, refresh_s=0.2)
    try:
        async with serve(gateway.app, timeouts=config.http_timeouts) as url:
            yield LiveGateway(url, gateway, workers, index)
    finally:
        for worker in workers:
            await worker.stop()


@pytest.fixture
async def live(tokenizer: Tokenizer) -> AsyncIterator[LiveGateway]:
    async with running_gateway(tokenizer) as gateway:
        yield gateway


@contextlib.asynccontextmanager
async def grpc_front(live: LiveGateway) -> AsyncIterator[str]:
    """The gateway's gRPC front (with its own body limit) served on a free loopback port while the block
    runs; yields its target."""
    limit = live.gateway.settings.limits.max_body_bytes
    server, port = build_grpc_server(live.gateway.grpc_servicer(), "127.0.0.1:0", limit)
    await server.start()
    try:
        yield f"127.0.0.1:{port}"
    finally:
        await server.stop(grace=None)


@pytest.fixture
async def grpc_target(live: LiveGateway) -> AsyncIterator[str]:
    """``host:port`` of the ``live`` gateway's gRPC front."""
    async with grpc_front(live) as target:
        yield target
