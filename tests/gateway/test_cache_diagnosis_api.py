"""``GET /v1/cache/diagnose/{request_id}`` through a real gateway (HTTP on loopback) over scripted workers
that cache by salt: a tenant gets the diagnosis of its own requests, by the gateway's id only, and a 404
for anyone else's; the missed tokens are counted by cause."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass

import httpx
import pytest

from kvgate.common.tokenizer import Tokenizer
from kvgate.gateway.diagnosis import DiagnosisSettings
from kvgate.gateway.tenancy import KeyRing, Tenant, hash_key
from tests.support.live_gateway import MODEL, LiveGateway, running_gateway
from tests.support.scripted_worker import fail_seed
from tests.workers.service.helpers import eventually

SECRET = "The launch code of project Bluebird is 7-alpha. "
SYSTEM = "You are the assistant of a private company; answer in one line. " * 20 + SECRET
KEYS = {"acme": "kvg-acme-key", "beta": "kvg-beta-key"}
RING = KeyRing([(hash_key(key), Tenant(name)) for name, key in KEYS.items()])


@dataclass
class Client:
    http: httpx.AsyncClient

    async def chat(self, question: str, **extra: object) -> httpx.Response:
        messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": question}]
        reply = await self.http.post("/v1/chat/completions", json={"model": MODEL, "messages": messages,
                                                                   "max_tokens": 2} | extra)  # fmt: skip
        assert reply.status_code == 200, reply.text
        return reply

    async def diagnose(self, request_id: str) -> httpx.Response:
        return await self.http.get(f"/v1/cache/diagnose/{request_id}")


@pytest.fixture
async def live(tokenizer: Tokenizer) -> AsyncIterator[LiveGateway]:
    async with running_gateway(tokenizer, keys=RING) as gateway:
        yield gateway


def client(live: LiveGateway, tenant: str | None, **headers: str) -> Client:
    auth = {"authorization": f"Bearer {KEYS[tenant]}"} if tenant else {}
    return Client(httpx.AsyncClient(base_url=live.url, headers=auth | headers, timeout=30))


async def test_a_tenant_gets_the_diagnosis_of_its_own_requests(live: LiveGateway) -> None:
    acme = client(live, "acme")
    first = await acme.chat("Who are you?")
    report = (await acme.diagnose(first.headers["x-request-id"])).json()
    assert report["request_id"] == first.headers["x-request-id"]
    assert report["cause"] == "new_prefix"
    assert report["prompt_tokens"] == first.json()["usage"]["prompt_tokens"]
    assert report["cached_tokens"] == first.json()["usage"]["prompt_tokens_details"]["cached_tokens"] == 0
    assert report["first_divergent_token"] == 0
    assert set(report) == {"request_id", "prompt_tokens", "cached_tokens", "first_divergent_token", "cause",
                           "detail", "evidence"}  # fmt: skip

    await eventually(lambda: live.index.size > 0)
    again = await acme.chat("Who are you?")
    report = (await acme.diagnose(again.headers["x-request-id"])).json()
    assert report["cached_tokens"] == again.json()["usage"]["prompt_tokens_details"]["cached_tokens"] > 0
    assert (report["cause"], report["first_divergent_token"]) == ("hit", None)


async def test_another_tenants_request_is_a_404_that_reveals_nothing(live: LiveGateway) -> None:
    acme, beta = client(live, "acme"), client(live, "beta")
    mine = (await acme.chat("Who are you?")).headers["x-request-id"]
    theirs = await beta.diagnose(mine)
    unknown = await beta.diagnose("0" * 32)
    assert theirs.status_code == unknown.status_code == 404
    assert theirs.json()["error"]["code"] == "request_not_found"
    assert theirs.json()["error"]["type"] == "invalid_request_error"
    assert theirs.json()["error"]["message"].replace(mine, "X") == unknown.json()["error"]["message"].replace(
        "0" * 32, "X"
    )
    assert "Bluebird" not in theirs.text
    assert (await client(live, None).diagnose(mine)).status_code == 401


async def test_beta_with_the_same_prompt_is_never_compared_with_acme(live: LiveGateway) -> None:
    acme, beta = client(live, "acme"), client(live, "beta")
    await acme.chat("Who are you?")
    await eventually(lambda: live.index.size > 0)
    theirs = await beta.chat("Who are you?")
    report = (await beta.diagnose(theirs.headers["x-request-id"])).json()
    assert report["cause"] == "new_prefix"  # acme's identical request is not beta's to see
    assert "similar_request" not in report["evidence"]


async def test_a_client_request_id_is_echoed_but_is_not_the_key(live: LiveGateway) -> None:
    acme = client(live, "acme", **{"x-client-request-id": "my-trace-42"})
    reply = await acme.chat("Who are you?")
    assert reply.headers["x-client-request-id"] == "my-trace-42"
    assert reply.headers["x-request-id"] != "my-trace-42"
    assert (await acme.diagnose("my-trace-42")).status_code == 404
    assert (await acme.diagnose(reply.headers["x-request-id"])).status_code == 200


async def test_a_request_retried_away_from_its_holder_is_told_so(live: LiveGateway) -> None:
    acme = client(live, "acme")
    first = await acme.chat("Who are you?")
    holder = (await acme.diagnose(first.headers["x-request-id"])).json()["evidence"]["worker"]
    await eventually(lambda: live.index.size > 0)
    retried = await acme.chat("Who are you?", seed=fail_seed(holder))  # the holder fails it at once
    report = (await acme.diagnose(retried.headers["x-request-id"])).json()
    assert (report["cause"], report["cached_tokens"]) == ("routed_elsewhere", 0)
    assert report["evidence"]["attempts"] == 2
    assert report["evidence"]["better_worker"] == holder != report["evidence"]["worker"]
    assert report["evidence"]["why"] == "it was retried there after 1 failed or busy attempt(s)"


async def test_missed_tokens_are_counted_by_cause(live: LiveGateway) -> None:
    acme = client(live, "acme")
    reply = await acme.chat("Who are you?")
    missed = (await acme.diagnose(reply.headers["x-request-id"])).json()["evidence"]["reusable_tokens"]
    metrics = (await acme.http.get("/metrics")).text
    assert f'kvgate_cache_miss_tokens_total{{cause="new_prefix"}} {float(missed)}' in metrics
    assert 'kvgate_cache_miss_tokens_total{cause="evicted"} 0.0' in metrics


async def test_diagnosis_switched_off_records_nothing(tokenizer: Tokenizer) -> None:
    async with running_gateway(tokenizer, keys=RING, diagnosis=DiagnosisSettings(enabled=False)) as live:
        acme = client(live, "acme")
        reply = await acme.chat("Who are you?")
        assert (await acme.diagnose(reply.headers["x-request-id"])).status_code == 404
        assert len(live.gateway.diagnostics.recent) == 0
