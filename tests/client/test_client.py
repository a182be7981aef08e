"""``kvgate.client`` against the gateway's real gRPC front (scripted workers): both clients generate,
stream, route and list models; keys travel as metadata; errors keep their status; only UNAVAILABLE
before any output is retried. (``n`` and log-probabilities against a real worker:
tests/workers/service/test_grpc_logprobs_e2e.py.)"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import grpc
import pytest

from kvgate.client import AsyncKVGateClient, Chunk, Generation, KVGateClient, KVGateError, calls
from kvgate.common.tokenizer import Tokenizer
from kvgate.gateway.tenancy import KeyRing, Tenant, hash_key
from kvgate.proto import common_pb2, gateway_pb2_grpc
from tests.gateway.test_openai_api import LONG_SYSTEM
from tests.support.certs import make_certs
from tests.support.live_gateway import MODEL, LiveGateway, grpc_front, running_gateway
from tests.support.scripted_worker import Mode

CHAT = [{"role": "system", "content": LONG_SYSTEM}, {"role": "user", "content": "hello"}]


async def test_the_async_client_generates_streams_and_sees_the_cache(grpc_target: str) -> None:
    async with AsyncKVGateClient(grpc_target) as client:
        assert await client.models() == [MODEL]
        first = await client.generate(messages=CHAT, max_tokens=4)
        items = [item async for item in client.stream(messages=CHAT, max_tokens=4)]
        route = await client.route(messages=CHAT)
    assert isinstance(first, Generation)
    assert first.usage.completion_tokens == 4
    assert len(first.token_ids) == 4
    assert all(isinstance(i, Chunk) for i in items[:-1])
    again = items[-1]
    assert isinstance(again, Generation)
    assert again.text == "".join(i.text for i in items[:-1])
    assert again.usage.cached_tokens > 0  # the repeat hit the prefix the first one cached
    assert again.route_reason == "cache_hit"
    assert again.worker_id == first.worker_id == route.chosen_worker
    assert route.matched_chunks[first.worker_id] == route.full_chunks


async def test_the_sync_client_does_the_same(grpc_target: str) -> None:
    def run() -> tuple[list[str], Generation, list[Chunk | Generation]]:
        with KVGateClient(grpc_target) as client:
            return (
                client.models(),
                client.generate(prompt="count:", max_tokens=3),
                list(client.stream(token_ids=[1, 2, 3], max_tokens=2, request_id="mine-1")),
            )

    models, text, streamed = await asyncio.to_thread(run)
    assert models == [MODEL]
    assert text.usage.completion_tokens == 3
    assert isinstance(streamed[-1], Generation)
    assert streamed[-1].request_id == "mine-1"


async def test_errors_keep_their_status_and_bad_arguments_are_caught_early(grpc_target: str) -> None:
    async with AsyncKVGateClient(grpc_target) as client:
        with pytest.raises(KVGateError) as unknown:
            await client.generate(prompt="hi", model="no-such-model")
        with pytest.raises(ValueError, match="exactly one"):
            await client.generate(prompt="hi", messages=CHAT)
    assert unknown.value.code is grpc.StatusCode.NOT_FOUND


def test_n_and_log_probabilities_travel_in_the_sampling_fields() -> None:
    asked = calls.request(prompt="hi", n=2, logprobs=True, top_logprobs=3, prompt_logprobs=0)
    assert (asked.sampling.n, asked.sampling.logprobs, asked.sampling.prompt_logprobs) == (2, 3, 0)
    assert calls.request(prompt="hi", logprobs=True).sampling.logprobs == 0  # the sampled token's only
    plain = calls.request(prompt="hi").sampling
    assert (plain.n, plain.HasField("logprobs"), plain.HasField("prompt_logprobs")) == (0, False, False)
    with pytest.raises(ValueError, match="needs logprobs=True"):
        calls.request(prompt="hi", top_logprobs=2)
    with pytest.raises(ValueError, match="at least 1"):
        calls.request(prompt="hi", n=0)


async def test_a_json_schema_travels_as_the_output_constraint(grpc_target: str) -> None:
    schema = {"type": "object", "properties": {"ok": {"type": "boolean"}}}
    sent = calls.request(prompt="hi", json_schema=schema)
    assert sent.sampling.constraint.kind == common_pb2.CONSTRAINT_KIND_JSON_SCHEMA
    assert json.loads(sent.sampling.constraint.spec) == schema
    async with AsyncKVGateClient(grpc_target) as client:
        await client.generate(prompt="hi", max_tokens=2, json_schema=schema)  # checked, then generated
        with pytest.raises(KVGateError) as refused:
            await client.generate(prompt="hi", json_schema={"type": "integer", "minimum": 2, "maximum": 1})
    assert refused.value.code is grpc.StatusCode.INVALID_ARGUMENT
    assert "Unsatisfiable schema" in refused.value.details


async def test_only_unavailable_before_any_output_is_retried(live: LiveGateway, grpc_target: str) -> None:
    for worker in live.workers:
        worker.mode = Mode.FAIL_BEFORE_FIRST  # the gateway tries each, then answers UNAVAILABLE
    async with AsyncKVGateClient(grpc_target, retries=2, backoff_s=0.01) as client:
        with pytest.raises(KVGateError) as failed:
            await client.generate(prompt="hi", max_tokens=2)
    assert failed.value.code is grpc.StatusCode.UNAVAILABLE
    attempts = sum(len(w.received) for w in live.workers)
    for worker in live.workers:
        worker.mode, worker.received = Mode.FAIL_AFTER_TWO, []
    async with AsyncKVGateClient(grpc_target, retries=2, backoff_s=0.01) as client:
        with pytest.raises(KVGateError):
            await client.generate(prompt="again", max_tokens=8)
    assert attempts == 3 * len(live.workers)  # three calls, each tried on every worker
    assert sum(len(w.received) for w in live.workers) == 1  # output had started: not sent again


async def test_the_api_key_travels_as_metadata(tokenizer: Tokenizer) -> None:
    ring = KeyRing([(hash_key("kvg-client-key"), Tenant("acme"))])
    async with running_gateway(tokenizer, keys=ring) as live, grpc_front(live) as target:
        async with AsyncKVGateClient(target, api_key="kvg-client-key") as client:
            assert (await client.generate(prompt="hi", max_tokens=2)).usage.completion_tokens == 2
        async with AsyncKVGateClient(target, api_key="kvg-wrong") as client:
            with pytest.raises(KVGateError) as refused:
                await client.generate(prompt="hi", max_tokens=2)
    assert refused.value.code is grpc.StatusCode.UNAUTHENTICATED


async def test_tls_verifies_the_gateway_against_the_given_ca(live: LiveGateway, tmp_path: Path) -> None:
    """A gateway behind TLS (here a TLS port on the same service): the client verifies it against the CA
    it is given, and refuses one signed by another."""
    certs = make_certs(tmp_path)
    server = grpc.aio.server()
    gateway_pb2_grpc.add_KVGatewayServicer_to_server(live.gateway.grpc_servicer(), server)
    credentials = grpc.ssl_server_credentials([(certs.key.read_bytes(), certs.cert.read_bytes())])
    port = server.add_secure_port("127.0.0.1:0", credentials)
    await server.start()
    try:
        async with AsyncKVGateClient(f"localhost:{port}", root_certificates=certs.ca.read_bytes()) as client:
            assert (await client.generate(prompt="over tls", max_tokens=2)).usage.completion_tokens == 2
        async with AsyncKVGateClient(
            f"localhost:{port}", root_certificates=certs.other_ca.read_bytes(), retries=0, timeout_s=5
        ) as client:
            with pytest.raises(KVGateError) as refused:
                await client.generate(prompt="over tls", max_tokens=2)
    finally:
        await server.stop(grace=None)
    assert refused.value.code is grpc.StatusCode.UNAVAILABLE  # the handshake fails: no answer at all
