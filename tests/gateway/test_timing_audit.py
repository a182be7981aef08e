"""The timing audit against a real gateway with two tenants, over scripted workers whose prefill takes
time per uncached token (so a cache hit is visibly faster, as on a real worker). Within one tenant the
hit and miss TTFTs are told apart (positive control); across tenants they are not."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from kvgate.audit.timing import Target, run_audit
from kvgate.common.clock import SystemClock
from kvgate.common.tokenizer import Tokenizer
from kvgate.gateway.compose import build_gateway
from kvgate.gateway.settings import GatewaySettings
from kvgate.gateway.tenancy import KeyRing, Tenant, hash_key
from kvgate.index import IndexSettings, MemoryPrefixIndex
from kvgate.proto.ids import WorkerId
from tests.support.http_server import serve
from tests.support.live_gateway import CACHE, LIMITS, MODEL
from tests.support.scripted_worker import ScriptedWorker

KEYS = {"victim": "kvg-victim", "attacker": "kvg-attacker"}


@pytest.fixture
async def url(tokenizer: Tokenizer) -> AsyncIterator[str]:
    index = MemoryPrefixIndex(IndexSettings(heartbeat_ttl_s=3600), SystemClock())  # no heartbeats here
    workers = [
        await ScriptedWorker(WorkerId(f"w{i}"), CACHE, index, prefill_delay_per_token_s=0.0004).start()
        for i in range(2)
    ]
    ring = KeyRing([(hash_key(key), Tenant(name)) for name, key in KEYS.items()])
    gateway = build_gateway(GatewaySettings(MODEL, CACHE, limits=LIMITS, keys=ring), index, tokenizer, 0.1)
    async with serve(gateway.app) as base:
        yield base
    for worker in workers:
        await worker.stop()


async def test_hits_are_visible_within_a_tenant_and_invisible_across_tenants(url: str) -> None:
    target = Target(url, MODEL, KEYS["victim"], KEYS["attacker"])
    result = await run_audit(target, samples=20, prompt_words=300)
    same, cross = result.same_tenant.summary(), result.cross_tenant.summary()
    assert same["p_value"] < 1e-4, same  # the control: the channel exists and the audit can see it
    assert same["hit_median_s"] < same["miss_median_s"]
    assert cross["p_value"] > 1e-4, cross  # across tenants, "hit" probes look like misses
