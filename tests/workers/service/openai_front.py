"""A real gateway in this process over the workers of ``index``, served over HTTP, and the official
``openai`` client pointed at it: the front of the service tests that speak the OpenAI API."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

import openai

from kvgate.common.tokenizer import Tokenizer
from kvgate.gateway.compose import build_gateway
from kvgate.gateway.settings import GatewaySettings, Limits
from kvgate.index.base import PrefixIndex
from kvgate.proto.layout import CacheLayout
from tests.support.http_server import serve
from tests.workers.service.helpers import CACHE, eventually


@contextlib.asynccontextmanager
async def openai_front(
    index: PrefixIndex, tokenizer: Tokenizer, limits: Limits, model: str = "tiny", cache: CacheLayout = CACHE
) -> AsyncIterator[openai.AsyncOpenAI]:
    """A client of a gateway serving ``model`` (``cache``: the test cache layout by default), once one
    worker is routable."""
    gateway = build_gateway(GatewaySettings(model, cache, limits=limits), index, tokenizer, refresh_s=0.1)
    async with serve(gateway.app) as url:
        await eventually(lambda: gateway.dispatcher.routable_count() == 1)
        async with openai.AsyncOpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0) as client:
            yield client
