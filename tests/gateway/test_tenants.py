"""Tenant isolation through a real gateway (HTTP and gRPC on loopback) over scripted workers that cache
by the salt they are sent: same tenant -> reuse; different tenants -> none, in both directions, in the
index, in the dry run and in the workers' own accounting; shared namespaces only by opt-in; keys,
rate limits and the gateway's in-flight bound."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass

import grpc
import httpx
import pytest

from kvgate.common.clock import SystemClock
from kvgate.common.tokenizer import Tokenizer
from kvgate.gateway.compose import Gateway, build_gateway
from kvgate.gateway.settings import GatewaySettings
from kvgate.gateway.tenancy import KeyRing, RateLimit, Tenant, hash_key
from kvgate.index import IndexSettings, MemoryPrefixIndex
from kvgate.proto import gateway_pb2, gateway_pb2_grpc
from kvgate.proto.ids import WorkerId
from tests.support.http_server import serve
from tests.support.live_gateway import CACHE, LIMITS, MODEL
from tests.support.scripted_worker import Mode, ScriptedWorker

SYSTEM = "You are the assistant of a private company; keep its secrets. " * 30  # > 3 chunks
KEYS = {"acme": "kvg-acme-key", "beta": "kvg-beta-key", "slow": "kvg-slow-key"}
TENANTS = {
    "acme": Tenant("acme", shared_namespaces=frozenset({"public"})),
    "beta": Tenant("beta", shared_namespaces=frozenset({"public"})),
    "slow": Tenant("slow", RateLimit(requests_per_minute=2)),
}


@dataclass
class Tenanted:
    url: str
    gateway: Gateway
    workers: list[ScriptedWorker]

    def client(self, tenant: str | None, **headers: str) -> httpx.AsyncClient:
        auth = {"authorization": f"Bearer {KEYS[tenant]}"} if tenant else {}
        return httpx.AsyncClient(base_url=self.url, headers=auth | headers, timeout=30)


@pytest.fixture
async def tenanted(tokenizer: Tokenizer) -> AsyncIterator[Tenanted]:
    index = MemoryPrefixIndex(IndexSettings(), SystemClock())
    workers = [await ScriptedWorker(WorkerId(f"w{i}"), CACHE, index).start() for i in range(2)]
    ring = KeyRing([(hash_key(KEYS[name]), tenant) for name, tenant in TENANTS.items()])
    settings = GatewaySettings(MODEL, CACHE, limits=LIMITS, keys=ring, max_concurrent_requests=2)
    gateway = build_gateway(settings, index, tokenizer, refresh_s=0.2)
    async with serve(gateway.app) as url:
        yield Tenanted(url, gateway, workers)
    for worker in workers:
        await worker.stop()


def body(question: str, system: str = SYSTEM) -> dict:
    messages = [{"role": "system", "content": system}, {"role": "user", "content": question}]
    return {"model": MODEL, "messages": messages, "max_tokens": 2}


async def cached(client: httpx.AsyncClient, question: str) -> int:
    reply = await client.post("/v1/chat/completions", json=body(question))
    assert reply.status_code == 200, reply.text
    return reply.json()["usage"]["prompt_tokens_details"]["cached_tokens"]


async def dry_run_chunks(client: httpx.AsyncClient) -> int:
    reply = await client.post("/v1/route", json=body("probe"))
    assert reply.status_code == 200, reply.text
    return max((m["matched_chunks"] for m in reply.json()["matches"]), default=0)


@pytest.mark.parametrize(("first", "second"), [("acme", "beta"), ("beta", "acme")])
async def test_the_same_tenant_reuses_its_cache_and_another_tenant_never_does(
    tenanted: Tenanted, first: str, second: str
) -> None:
    async with tenanted.client(first) as owner, tenanted.client(second) as other:
        assert await cached(owner, "q1") == 0
        await asyncio.sleep(0.1)
        assert await cached(owner, "q2") >= 3 * CACHE.chunk_size  # same tenant: reuse
        assert await dry_run_chunks(owner) >= 3
        assert await dry_run_chunks(other) == 0  # the index holds nothing under the other's salt
        assert await cached(other, "q3") == 0  # nor does any worker
        assert await cached(other, "q4") >= 3 * CACHE.chunk_size  # ...until it warms its own


async def test_a_shared_namespace_is_shared_only_by_the_tenants_that_opt_in(tenanted: Tenanted) -> None:
    public = {"x-kvgate-cache-namespace": "public"}
    question = "Please summarise our private quarterly numbers in detail. " * 30  # chunks of its own
    async with tenanted.client("acme", **public) as acme, tenanted.client("beta", **public) as beta:
        first = await acme.post("/v1/chat/completions", json=body(question))
        assert first.json()["usage"]["prompt_tokens_details"]["cached_tokens"] == 0
        await asyncio.sleep(0.1)
        shared = (await beta.post("/v1/route", json=body(question))).json()
        again = (await acme.post("/v1/route", json=body(question))).json()
        reused = await beta.post("/v1/chat/completions", json=body(question))
    system_chunks = shared["matches"][0]["matched_chunks"]
    assert system_chunks >= 3  # the published system prompt is reused across tenants...
    assert again["matches"][0]["matched_chunks"] >= system_chunks + 2  # ...acme's own suffix stays acme's
    usage = reused.json()["usage"]
    assert usage["prompt_tokens_details"]["cached_tokens"] == system_chunks * CACHE.chunk_size
    async with tenanted.client("beta") as beta_private:
        assert await cached(beta_private, "q3") == 0  # beta's own namespace is not the public one
    async with tenanted.client("slow", **public) as outsider:
        refused = await outsider.post("/v1/chat/completions", json=body("q4"))
    assert refused.status_code == 403
    assert refused.json()["error"]["code"] == "namespace_forbidden"
    async with tenanted.client("acme", **public) as acme:
        plain = {"model": MODEL, "prompt": "hi", "max_tokens": 2}
        completion = await acme.post("/v1/completions", json=plain)
    assert completion.status_code == 400  # no system prompt to share


async def test_a_client_cannot_choose_a_salt(tenanted: Tenanted) -> None:
    async with tenanted.client("acme") as acme:
        await cached(acme, "q1")
    spoofs = [{"x-kvgate-cache-namespace": "tenant:acme"}, {"x-kvgate-cache-namespace": "acme"}]
    for headers in spoofs:
        async with tenanted.client("beta", **headers) as beta:
            reply = await beta.post("/v1/chat/completions", json=body("q2"))
            assert reply.status_code == 403, headers
    async with tenanted.client("beta") as beta:
        for salt in ("tenant:acme", "\x1f", "tenant:acme\x1f", "k1:", "acme"):  # only narrows beta's own
            smuggled = await beta.post("/v1/chat/completions", json=body("q3") | {"cache_salt": salt})
            assert smuggled.status_code == 200, smuggled.text
            assert smuggled.json()["usage"]["prompt_tokens_details"]["cached_tokens"] == 0, salt
        empty = await beta.post("/v1/chat/completions", json=body("q3") | {"cache_salt": ""})
        assert empty.status_code == 400
        assert await cached(beta, "q4") == 0


async def test_a_client_salt_separates_caches_within_a_tenant(tenanted: Tenanted) -> None:
    async with tenanted.client("acme") as acme:

        def salted(question: str, salt: str) -> dict:
            return body(question) | {"cache_salt": salt}

        first = await acme.post("/v1/chat/completions", json=salted("q1", "user-1"))
        assert first.json()["usage"]["prompt_tokens_details"]["cached_tokens"] == 0
        await asyncio.sleep(0.1)
        again = await acme.post("/v1/chat/completions", json=salted("q2", "user-1"))
        other = await acme.post("/v1/chat/completions", json=salted("q3", "user-2"))
        assert again.json()["usage"]["prompt_tokens_details"]["cached_tokens"] >= 3 * CACHE.chunk_size
        assert other.json()["usage"]["prompt_tokens_details"]["cached_tokens"] == 0
        assert await cached(acme, "q4") == 0  # unsalted requests of the tenant are a third cache


@pytest.mark.parametrize(
    ("headers", "path"),
    [
        ({}, "/v1/chat/completions"),
        ({"authorization": "Bearer kvg-wrong"}, "/v1/chat/completions"),
        ({"authorization": "Basic a3ZnLWFjbWUta2V5"}, "/v1/completions"),
        ({}, "/v1/route"),
        ({"x-api-key": "kvg-wrong"}, "/v1/messages"),
    ],
)
async def test_requests_without_a_valid_key_get_401(tenanted: Tenanted, headers: dict, path: str) -> None:
    payload = {"model": MODEL, "max_tokens": 2, "messages": [{"role": "user", "content": "hi"}]}
    if path == "/v1/completions":
        payload = {"model": MODEL, "prompt": "hi", "max_tokens": 2}
    async with httpx.AsyncClient(base_url=tenanted.url, headers=headers) as client:
        reply = await client.post(path, json=payload)
        models = await client.get("/v1/models")
    assert reply.status_code == 401
    error = reply.json()["error"]
    if path == "/v1/messages":
        assert reply.json()["type"] == "error"
        assert error["type"] == "authentication_error"
    else:
        assert error["code"] == "invalid_api_key"
    assert models.status_code == 401
    assert not any(w.received for w in tenanted.workers)


async def test_anthropic_clients_authenticate_with_x_api_key(tenanted: Tenanted) -> None:
    payload = {"model": MODEL, "max_tokens": 2, "messages": [{"role": "user", "content": "hi"}]}
    async with httpx.AsyncClient(base_url=tenanted.url, headers={"x-api-key": KEYS["acme"]}) as client:
        reply = await client.post("/v1/messages", json=payload)
    assert reply.status_code == 200, reply.text


async def test_ops_endpoints_need_no_key(tenanted: Tenanted) -> None:
    async with httpx.AsyncClient(base_url=tenanted.url) as client:
        for path in ("/health", "/metrics"):
            assert (await client.get(path)).status_code == 200, path


async def test_a_tenant_past_its_rate_limit_gets_429_with_retry_after(tenanted: Tenanted) -> None:
    """Every request counts, whatever becomes of it: a dry run, and one refused as invalid, cost as
    much of the allowance (2 a minute) as a generation, so refusals cannot be repeated for free."""
    async with tenanted.client("slow") as slow, tenanted.client("acme") as acme:
        assert (await slow.post("/v1/route", json=body("probe"))).status_code == 200
        assert (await slow.post("/v1/chat/completions", json={"model": MODEL})).status_code == 400
        assert (await slow.post("/v1/route", json=body("probe"))).status_code == 429
        assert (await slow.get("/v1/models")).status_code == 200  # listing models is not counted
        limited = await slow.post("/v1/chat/completions", json=body("q3"))
        assert limited.status_code == 429
        assert limited.json()["error"]["code"] == "rate_limit_exceeded"
        assert 1 <= int(limited.headers["retry-after"]) <= 30
        assert (await acme.post("/v1/chat/completions", json=body("q4"))).status_code == 200


async def test_past_the_gateways_in_flight_bound_requests_are_refused_at_once(tenanted: Tenanted) -> None:
    for worker in tenanted.workers:
        worker.mode = Mode.STALL
    async with tenanted.client("acme") as acme:
        held = [asyncio.create_task(acme.post("/v1/chat/completions", json=body(f"h{i}"))) for i in range(2)]
        for _ in range(500):
            if sum(len(w.received) for w in tenanted.workers) >= 2:
                break
            await asyncio.sleep(0.01)
        start = time.monotonic()
        refused = await acme.post("/v1/chat/completions", json=body("one more"))
        refused_in = time.monotonic() - start
        async with httpx.AsyncClient(base_url=tenanted.url) as anonymous:  # while both slots are held
            unauthenticated = await anonymous.post("/v1/chat/completions", json=body("no key"))
        for task in held:
            task.cancel()
        await asyncio.gather(*held, return_exceptions=True)
    assert unauthenticated.status_code == 401  # checked before a slot is taken: not a 503
    assert refused.status_code == 503
    assert refused.json()["error"]["code"] == "overloaded"
    assert refused.headers["retry-after"] == "1"
    assert refused_in < 5  # refused, not queued behind the stalled ones (their deadline is 30 s)
    assert tenanted.gateway.gate.refused == 1


async def test_the_grpc_front_takes_the_same_keys_as_metadata(tenanted: Tenanted) -> None:
    server = grpc.aio.server()
    gateway_pb2_grpc.add_KVGatewayServicer_to_server(tenanted.gateway.grpc_servicer(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            stub = gateway_pb2_grpc.KVGatewayStub(channel)
            request = gateway_pb2.GatewayRequest(model=MODEL, prompt="hello there")
            request.sampling.max_tokens = 2
            key = [("authorization", f"Bearer {KEYS['acme']}")]
            ok = [m async for m in stub.Generate(request, metadata=key)]
            assert ok[-1].HasField("final")
            with pytest.raises(grpc.aio.AioRpcError) as denied:
                await stub.ListModels(gateway_pb2.ListModelsRequest(), metadata=[("x-api-key", "kvg-wrong")])
            assert denied.value.code() is grpc.StatusCode.UNAUTHENTICATED
            with pytest.raises(grpc.aio.AioRpcError) as anonymous:
                [m async for m in stub.Generate(request)]
            assert anonymous.value.code() is grpc.StatusCode.UNAUTHENTICATED
            gate, taken = tenanted.gateway.gate, 0
            while gate.try_enter():  # every in-flight slot taken
                taken += 1
            with pytest.raises(grpc.aio.AioRpcError) as no_slot_for_a_bad_key:
                [m async for m in stub.Generate(request, metadata=[("x-api-key", "kvg-wrong")])]
            with pytest.raises(grpc.aio.AioRpcError) as full:
                [m async for m in stub.Generate(request, metadata=key)]
            for _ in range(taken):
                gate.leave()
    finally:
        await server.stop(None)
    # the key is checked before a slot is taken: a bad key is UNAUTHENTICATED even when none is free
    assert no_slot_for_a_bad_key.value.code() is grpc.StatusCode.UNAUTHENTICATED
    assert full.value.code() is grpc.StatusCode.UNAVAILABLE
