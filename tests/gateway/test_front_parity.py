"""The same scenarios through the HTTP front (OpenAI-style) and the gRPC front, on one gateway over
scripted workers: equal outputs and usage, the same cache behaviour, refusals of the same kind, and each
tenant's usage counted alike on ``/metrics`` (the Anthropic and Responses routes too)."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any, Protocol

import grpc
import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from kvgate.common.tokenizer import Tokenizer
from kvgate.gateway.tenancy import KeyRing, Tenant, hash_key
from kvgate.proto import common_pb2, gateway_pb2, gateway_pb2_grpc
from tests.support.live_gateway import LIMITS, MODEL, LiveGateway, grpc_front, running_gateway
from tests.support.scripted_worker import Mode

KEYS = {"acme": "kvg-parity-acme", "beta": "kvg-parity-beta"}
PUBLIC = frozenset({"public"})
SYSTEM = "You answer questions about prefix caching, briefly and precisely. " * 12  # > 1 chunk


@dataclass(frozen=True)
class Outcome:
    text: str
    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int


class RefusedError(Exception):
    """A refusal, by kind: invalid, not_found, unauthenticated, permission_denied."""


class Front(Protocol):
    name: str

    async def chat(self, system: str, user: str, tenant: str = "acme", **options: Any) -> Outcome: ...
    async def completion(self, prompt: str, tenant: str = "acme", **options: Any) -> Outcome: ...
    async def stream(self, system: str, user: str, tenant: str = "acme") -> str: ...


_HTTP_KIND = {
    400: "invalid",
    401: "unauthenticated",
    403: "permission_denied",
    404: "not_found",
    504: "deadline",
}
_GRPC_KIND = {
    grpc.StatusCode.INVALID_ARGUMENT: "invalid",
    grpc.StatusCode.UNAUTHENTICATED: "unauthenticated",
    grpc.StatusCode.NOT_FOUND: "not_found",
    grpc.StatusCode.PERMISSION_DENIED: "permission_denied",
    grpc.StatusCode.DEADLINE_EXCEEDED: "deadline",
}


class Http:
    name = "http"

    def __init__(self, url: str) -> None:
        self._url = url

    def _headers(self, tenant: str, namespace: str | None) -> dict[str, str]:
        headers = {"authorization": f"Bearer {KEYS.get(tenant, 'kvg-wrong')}"}
        return headers | ({"x-kvgate-cache-namespace": namespace} if namespace else {})

    async def _post(self, path: str, body: dict, tenant: str, namespace: str | None) -> dict:
        async with httpx.AsyncClient(base_url=self._url, timeout=30) as http:
            reply = await http.post(path, json=body, headers=self._headers(tenant, namespace))
        if reply.status_code != 200:
            raise RefusedError(_HTTP_KIND.get(reply.status_code, str(reply.status_code)))
        return reply.json()

    async def chat(self, system: str, user: str, tenant: str = "acme", **options: Any) -> Outcome:
        namespace = options.pop("namespace", None)
        messages = [{"role": "system", "content": system}, {"role": "user", "content": user}]
        body = {"model": options.pop("model", MODEL), "messages": messages, "max_tokens": 4} | options
        return _outcome(await self._post("/v1/chat/completions", body, tenant, namespace), "message")

    async def completion(self, prompt: str, tenant: str = "acme", **options: Any) -> Outcome:
        body = {"model": MODEL, "prompt": prompt, "max_tokens": 4} | options
        return _outcome(await self._post("/v1/completions", body, tenant, None), "text")

    async def stream(self, system: str, user: str, tenant: str = "acme") -> str:
        messages = [{"role": "system", "content": system}, {"role": "user", "content": user}]
        body = {"model": MODEL, "messages": messages, "max_tokens": 4, "stream": True}
        async with (
            httpx.AsyncClient(base_url=self._url, timeout=30) as http,
            http.stream(
                "POST", "/v1/chat/completions", json=body, headers=self._headers(tenant, None)
            ) as reply,
        ):
            text = ""
            async for line in reply.aiter_lines():
                if line.startswith("data: {"):
                    choices = json.loads(line.removeprefix("data: "))["choices"]
                    text += choices[0]["delta"].get("content") or "" if choices else ""
            return text


def _outcome(body: dict, field: str) -> Outcome:
    choice = body["choices"][0]
    text = choice["message"]["content"] if field == "message" else choice["text"]
    usage = body["usage"]
    cached = usage.get("prompt_tokens_details", {}).get("cached_tokens", 0)
    return Outcome(text, usage["prompt_tokens"], usage["completion_tokens"], cached)


class Grpc:
    name = "grpc"

    def __init__(self, channel: grpc.aio.Channel) -> None:
        self._stub = gateway_pb2_grpc.KVGatewayStub(channel)

    @staticmethod
    def _metadata(tenant: str, namespace: str | None) -> tuple[tuple[str, str], ...]:
        pairs = (("authorization", f"Bearer {KEYS.get(tenant, 'kvg-wrong')}"),)
        return pairs + ((("x-kvgate-cache-namespace", namespace),) if namespace else ())

    async def _generate(
        self, request: gateway_pb2.GatewayRequest, tenant: str, namespace: str | None
    ) -> list:
        try:
            return [m async for m in self._stub.Generate(request, metadata=self._metadata(tenant, namespace))]
        except grpc.aio.AioRpcError as error:
            raise RefusedError(_GRPC_KIND.get(error.code(), error.code().name)) from None

    async def chat(self, system: str, user: str, tenant: str = "acme", **options: Any) -> Outcome:
        namespace = options.pop("namespace", None)
        chat = _chat(system, user)
        request = gateway_pb2.GatewayRequest(
            model=options.pop("model", MODEL), chat=chat, **_grpc_options(options)
        )
        return _grpc_outcome(await self._generate(request, tenant, namespace))

    async def completion(self, prompt: str, tenant: str = "acme", **options: Any) -> Outcome:
        request = gateway_pb2.GatewayRequest(model=MODEL, prompt=prompt, **_grpc_options(options))
        return _grpc_outcome(await self._generate(request, tenant, None))

    async def stream(self, system: str, user: str, tenant: str = "acme") -> str:
        sampling = common_pb2.SamplingParams(max_tokens=4)
        request = gateway_pb2.GatewayRequest(model=MODEL, chat=_chat(system, user), sampling=sampling)
        messages = await self._generate(request, tenant, None)
        return "".join(m.delta.text for m in messages if m.WhichOneof("kind") == "delta")


def _chat(system: str, user: str) -> gateway_pb2.ChatMessages:
    turns = [
        gateway_pb2.ChatMessage(role="system", content=system),
        gateway_pb2.ChatMessage(role="user", content=user),
    ]
    return gateway_pb2.ChatMessages(messages=turns)


def _grpc_options(options: dict[str, Any]) -> dict[str, Any]:
    """HTTP body fields as GatewayRequest fields (sampling values, cache_salt)."""
    sampling = {"max_tokens": options.pop("max_tokens", 4)} | {
        k: options.pop(k) for k in ("temperature", "top_p", "seed") if k in options
    }
    return {"sampling": common_pb2.SamplingParams(**sampling)} | options


def _grpc_outcome(messages: list) -> Outcome:
    final = messages[-1].final
    text = "".join(m.delta.text for m in messages[:-1])
    usage = final.usage
    return Outcome(text, usage.prompt_tokens, usage.completion_tokens, usage.cached_tokens)


@dataclass
class Fronts:
    live: LiveGateway
    http: Http
    grpc: Grpc


@contextlib.asynccontextmanager
async def serving(tokenizer: Tokenizer, **settings: Any) -> AsyncIterator[Fronts]:
    """A gateway with ``settings`` and both its fronts."""
    ring = KeyRing([(hash_key(KEYS[name]), Tenant(name, shared_namespaces=PUBLIC)) for name in KEYS])
    async with (
        running_gateway(tokenizer, keys=ring, **settings) as live,
        grpc_front(live) as target,
        grpc.aio.insecure_channel(target) as channel,
    ):
        yield Fronts(live, Http(live.url), Grpc(channel))


@pytest.fixture
async def fronts(tokenizer: Tokenizer) -> AsyncIterator[Fronts]:
    async with serving(tokenizer) as both_fronts:
        yield both_fronts


def both(fronts: Fronts) -> list[Front]:
    return [fronts.http, fronts.grpc]


async def test_a_chat_and_a_completion_give_equal_outputs_and_usage(fronts: Fronts) -> None:
    chats = [await f.chat(f"{SYSTEM} chat", "What is a chunk?", temperature=0.0) for f in both(fronts)]
    texts = [await f.completion("Explain prefix caching:", seed=7) for f in both(fronts)]
    streams = [await f.stream(f"{SYSTEM} stream", "And a block?") for f in both(fronts)]
    for http, grpc_ in (chats, texts):
        assert (http.text, http.prompt_tokens, http.completion_tokens) == (
            grpc_.text, grpc_.prompt_tokens, grpc_.completion_tokens)  # fmt: skip
    assert chats[1].cached_tokens == chats[0].prompt_tokens // 128 * 128  # one cache for both fronts
    assert streams[0] == streams[1]
    assert streams[0]


async def test_a_repeat_is_cached_alike_and_a_salt_splits_the_cache_alike(fronts: Fronts) -> None:
    seen = []
    for front in both(fronts):  # each front warms and repeats its own prompt (of equal length)
        system = f"({front.name}) {SYSTEM}"
        first = await front.chat(system, "one")
        repeat = await front.chat(system, "two")
        salted = await front.chat(system, "three", cache_salt="mine")
        assert (first.cached_tokens, salted.cached_tokens) == (0, 0), front.name
        seen.append(repeat.cached_tokens)
    assert seen[0] == seen[1] > 0  # the whole chunks of the shared system prompt, on both


async def test_a_shared_namespace_shares_alike(fronts: Fronts) -> None:
    shared = []
    for front in both(fronts):
        system = f"[{front.name}] {SYSTEM}"
        await front.chat(system, "acme asks", tenant="acme", namespace="public")
        other = await front.chat(system, "beta asks", tenant="beta", namespace="public")
        private = await front.chat(system, "beta again", tenant="beta")
        shared.append(other.cached_tokens)
        assert private.cached_tokens == 0, front.name  # outside the namespace, tenants never share
    assert shared[0] == shared[1] > 0


@pytest.mark.parametrize(
    ("call", "kind"),
    [
        (lambda f: f.chat(SYSTEM, "hi", model="no-such-model"), "not_found"),
        (lambda f: f.chat(SYSTEM, "hi", temperature=-1.0), "invalid"),
        (lambda f: f.chat(SYSTEM, "hi", max_tokens=100_000), "invalid"),
        (lambda f: f.chat(SYSTEM, "hi", tenant="mallory"), "unauthenticated"),
        (lambda f: f.chat(SYSTEM, "hi", tenant="beta", namespace="private-club"), "permission_denied"),
    ],
    ids=["unknown-model", "bad-temperature", "too-many-tokens", "no-key", "forbidden-namespace"],
)
async def test_refusals_are_of_the_same_kind(fronts: Fronts, call, kind: str) -> None:
    kinds = []
    for front in both(fronts):
        with pytest.raises(RefusedError) as refused:
            await call(front)
        kinds.append(str(refused.value))
    assert kinds == [kind, kind]


async def test_a_cache_breakpoint_pins_the_same_prefix_for_the_same_ttl(fronts: Fronts) -> None:
    """Anthropic's cache_control on the system prompt over HTTP, ``cache_ttl`` on the system message
    over gRPC: the worker is asked to pin the same tokens for the same time."""
    headers = {"x-api-key": KEYS["acme"]}
    system = [{"type": "text", "text": SYSTEM, "cache_control": {"type": "ephemeral", "ttl": "1h"}}]
    body = {
        "model": MODEL,
        "max_tokens": 2,
        "messages": [{"role": "user", "content": "pin it"}],
        "system": system,
    }
    async with httpx.AsyncClient(base_url=fronts.live.url, timeout=30) as http:
        assert (await http.post("/v1/messages", json=body, headers=headers)).status_code == 200
    chat = _chat(SYSTEM, "pin it")
    chat.messages[0].cache_ttl = "1h"
    request = gateway_pb2.GatewayRequest(
        model=MODEL, chat=chat, sampling=common_pb2.SamplingParams(max_tokens=2)
    )
    await fronts.grpc._generate(request, "acme", None)
    hints = [h for w in fronts.live.workers for h in w.hints]
    assert len(hints) == 2
    assert hints[0] == hints[1]
    assert hints[0].ttl_s == 3600
    assert hints[0].pinned_prefix_tokens > 0
    request.chat.messages[0].cache_ttl = "2h"
    with pytest.raises(RefusedError, match="invalid"):
        await fronts.grpc._generate(request, "acme", None)


async def test_leaving_cancels_the_request_on_its_worker_on_both_fronts(fronts: Fronts) -> None:
    for worker in fronts.live.workers:
        worker.mode = Mode.STALL_AFTER_TWO
    for front in both(fronts):
        before = sum(len(w.cancelled) for w in fronts.live.workers)
        task = asyncio.create_task(front.chat(f"{front.name} {SYSTEM}", "stall"))
        for _ in range(500):
            if sum(w.active for w in fronts.live.workers):
                break
            await asyncio.sleep(0.01)
        task.cancel()  # the client goes away: HTTP closes its connection, gRPC cancels the call
        await asyncio.gather(task, return_exceptions=True)
        for _ in range(500):
            if sum(len(w.cancelled) for w in fronts.live.workers) > before:
                break
            await asyncio.sleep(0.01)
        assert sum(len(w.cancelled) for w in fronts.live.workers) == before + 1, front.name


async def test_past_the_gateways_deadline_both_fronts_say_so(tokenizer: Tokenizer) -> None:
    """A worker that never answers: the gateway's request deadline ends the request as a deadline on
    both fronts (HTTP 504, gRPC DEADLINE_EXCEEDED), and the worker is told to stop."""
    async with serving(tokenizer, limits=dataclasses.replace(LIMITS, request_timeout_s=1.0)) as stalled:
        for worker in stalled.live.workers:
            worker.mode = Mode.STALL
        kinds, stopped = [], []
        for front in both(stalled):
            before = sum(len(w.cancelled) for w in stalled.live.workers)
            with pytest.raises(RefusedError) as ended:
                await front.chat(f"{front.name} {SYSTEM}", "stall")
            kinds.append(str(ended.value))
            for _ in range(500):
                if sum(len(w.cancelled) for w in stalled.live.workers) > before:
                    break
                await asyncio.sleep(0.01)
            stopped.append(sum(len(w.cancelled) for w in stalled.live.workers) - before)
    assert kinds == ["deadline", "deadline"]
    assert stopped == [1, 1]


async def test_each_tenant_counts_the_usage_its_requests_reported_on_every_front(fronts: Fronts) -> None:
    """acme and beta each send chats on both fronts (a repeat reuses the system prompt), a completion,
    an Anthropic message and a Responses call: /metrics counts, per tenant, the prompt and cached tokens
    those requests reported. A name in the body or headers changes nothing; a refused key counts nowhere."""
    reported: dict[str, list[tuple[int, int]]] = {"acme": [], "beta": []}  # (prompt, cached) per request
    for tenant, usages in reported.items():
        system = f"<{tenant}> {SYSTEM}"
        for front in both(fronts):
            for question in ("one", "two"):
                chat = await front.chat(f"{front.name} {system}", question, tenant=tenant)
                usages.append((chat.prompt_tokens, chat.cached_tokens))
        completion = await fronts.http.completion(f"{tenant} completes", tenant=tenant, user="beta")
        usages.append((completion.prompt_tokens, completion.cached_tokens))
        async with httpx.AsyncClient(base_url=fronts.live.url, timeout=30) as http:
            usages.append(await _anthropic_usage(http, tenant, f"http {system}"))
            usages.append(await _responses_usage(http, tenant, f"http {system}"))
    with pytest.raises(RefusedError, match="unauthenticated"):
        await fronts.http.chat(SYSTEM, "no", tenant="mallory")
    counts = await _tenant_counts(fronts.live.url)
    for name in ("prompt_tokens", "cached_prompt_tokens", "requests"):
        assert set(counts[name]) == {"acme", "beta", "anonymous"}, name
        assert counts[name]["anonymous"] == 0, name
    for tenant, usages in reported.items():
        assert counts["prompt_tokens"][tenant] == sum(prompt for prompt, _ in usages), tenant
        assert counts["cached_prompt_tokens"][tenant] == sum(cached for _, cached in usages) > 0, tenant
        assert counts["requests"][tenant] == len(usages) == 7, tenant


async def _anthropic_usage(http: httpx.AsyncClient, tenant: str, system: str) -> tuple[int, int]:
    """A /v1/messages call with x-api-key (and a header and user id naming another tenant)."""
    headers = {"x-api-key": KEYS[tenant], "x-kvgate-tenant": "mallory"}
    body = {"model": MODEL, "max_tokens": 4, "system": system, "metadata": {"user_id": "beta"},
            "messages": [{"role": "user", "content": "three"}]}  # fmt: skip
    reply = await http.post("/v1/messages", json=body, headers=headers)
    assert reply.status_code == 200, reply.text
    usage = reply.json()["usage"]
    read, written = usage["cache_read_input_tokens"], usage["cache_creation_input_tokens"]
    return usage["input_tokens"] + read + written, read


async def _responses_usage(http: httpx.AsyncClient, tenant: str, system: str) -> tuple[int, int]:
    """A /v1/responses call with a Bearer key."""
    body = {"model": MODEL, "instructions": system, "input": "four", "max_output_tokens": 4}
    reply = await http.post("/v1/responses", json=body, headers={"authorization": f"Bearer {KEYS[tenant]}"})
    assert reply.status_code == 200, reply.text
    usage = reply.json()["usage"]
    return usage["input_tokens"], usage["input_tokens_details"]["cached_tokens"]


async def _tenant_counts(url: str) -> dict[str, dict[str, float]]:
    """``kvgate_tenant_<name>_total`` per ``tenant`` label value, read from ``/metrics``."""
    async with httpx.AsyncClient(base_url=url, timeout=30) as http:
        text = (await http.get("/metrics")).text
    counts: dict[str, dict[str, float]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name.startswith("kvgate_tenant_") and sample.name.endswith("_total"):
                name = sample.name.removeprefix("kvgate_tenant_").removesuffix("_total")
                counts.setdefault(name, {})[sample.labels["tenant"]] = sample.value
    return counts
