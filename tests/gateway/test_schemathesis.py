"""Schemathesis against the gateway's own OpenAPI schema (``/openapi.json``): the real app over real
HTTP, two scripted gRPC workers behind it. Every operation gets generated requests, valid and invalid;
no answer may be a 5xx, and every answer must match the response the schema declares for its status
(the OpenAI or Anthropic error body for a 4xx). Bounded and reproducible: a fixed number of examples per
operation, derandomized."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import response_schema_conformance

from kvgate.common.clock import SystemClock
from kvgate.common.tokenizer import Tokenizer
from kvgate.gateway.compose import build_gateway
from kvgate.gateway.settings import GatewaySettings
from kvgate.index import IndexSettings, MemoryPrefixIndex
from kvgate.proto.ids import WorkerId
from tests.support.background_loop import background_loop
from tests.support.http_server import serve
from tests.support.live_gateway import CACHE, LIMITS, MODEL
from tests.support.scripted_worker import ScriptedWorker

EXAMPLES = 100  # per operation


async def _start(tokenizer: Tokenizer, stack: contextlib.AsyncExitStack) -> str:
    # Scripted workers register once and never heartbeat: keep them live for the whole run.
    index = MemoryPrefixIndex(IndexSettings(heartbeat_ttl_s=3600), SystemClock())
    for i in range(2):
        worker = await ScriptedWorker(WorkerId(f"w{i}"), CACHE, index).start()
        stack.push_async_callback(worker.stop)
    gateway = build_gateway(GatewaySettings(MODEL, CACHE, limits=LIMITS), index, tokenizer, refresh_s=0.2)
    return await stack.enter_async_context(serve(gateway.app))


@pytest.fixture(scope="module")
def gateway_url(tokenizer: Tokenizer) -> Iterator[str]:
    with background_loop() as loop:
        stack = contextlib.AsyncExitStack()
        url = loop.run(_start(tokenizer, stack))
        try:
            yield url
        finally:
            loop.run(stack.aclose())


@pytest.fixture(scope="module")
def api_schema(gateway_url: str) -> schemathesis.BaseSchema:
    return schemathesis.openapi.from_url(f"{gateway_url}/openapi.json")


schema = schemathesis.pytest.from_fixture("api_schema")


@schema.parametrize()
@settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=True,
    suppress_health_check=list(HealthCheck),
)
def test_no_server_errors_and_every_answer_matches_the_schema(case: schemathesis.Case) -> None:
    if isinstance(case.body, dict) and isinstance(case.body.get("model"), str):
        case.body["model"] = MODEL  # the one served model: past the 404, into the generation path
    case.call_and_validate(checks=[not_a_server_error, response_schema_conformance], timeout=30)


def test_the_gateway_still_serves_after_the_run(gateway_url: str) -> None:
    body = {"model": MODEL, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}
    reply = httpx.post(f"{gateway_url}/v1/chat/completions", json=body, timeout=30)
    assert reply.status_code == 200
    assert reply.json()["usage"]["completion_tokens"] == 2
