"""A real gateway (HTTP on loopback) over scripted gRPC workers and the default model's tokenizer."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest

from kvgate.clock import SystemClock
from kvgate.gateway.compose import Gateway, build_gateway
from kvgate.gateway.settings import GatewaySettings, Limits
from kvgate.index import IndexSettings, MemoryPrefixIndex
from kvgate.models import default_model_path
from kvgate.proto.fingerprint import CacheConfig
from kvgate.proto.ids import WorkerId
from kvgate.tokenizer import Tokenizer, load_tokenizer
from tests.support.http_server import serve
from tests.support.scripted_worker import ScriptedWorker

MODEL = "smollm2"
CACHE = CacheConfig("HuggingFaceTB/SmolLM2-135M-Instruct")
LIMITS = Limits(context_window=4096, max_output_tokens=512, max_body_bytes=256 * 1024, request_timeout_s=30)


@pytest.fixture(scope="session")
def tokenizer() -> Tokenizer:
    return load_tokenizer(default_model_path())


@dataclass
class LiveGateway:
    url: str
    gateway: Gateway
    workers: list[ScriptedWorker]
    index: MemoryPrefixIndex


@pytest.fixture
async def live(tokenizer: Tokenizer) -> AsyncIterator[LiveGateway]:
    index = MemoryPrefixIndex(IndexSettings(), SystemClock())
    workers = [await ScriptedWorker(WorkerId(f"w{i}"), CACHE, index).start() for i in range(2)]
    settings = GatewaySettings(model_name=MODEL, cache=CACHE, limits=LIMITS)
    gateway = build_gateway(settings, index, tokenizer, refresh_s=0.2)
    async with serve(gateway.app) as url:
        yield LiveGateway(url, gateway, workers, index)
    for worker in workers:
        await worker.stop()
