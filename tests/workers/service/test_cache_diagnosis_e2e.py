"""Cache-miss diagnosis end to end: the real gateway (HTTP) in front of two real workers on the tiny
model (byte tokens: one token per character), its index fed by the event feed. Each cause is produced on
purpose and diagnosed: a timestamp inserted near token 300 of a ~900-token system prompt, two halves
swapped, an exact repeat, a repeat after the blocks' TTL, the same prompt under another cache salt; and
another tenant asking gets a 404."""

from __future__ import annotations

import contextlib
import json
import shutil
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from kvgate.common.clock import SystemClock
from kvgate.common.tokenizer import Tokenizer, load_tokenizer
from kvgate.gateway.compose import Gateway, build_gateway
from kvgate.gateway.settings import GatewaySettings, Limits
from kvgate.gateway.tenancy import KeyRing, Tenant, hash_key
from kvgate.index import IndexSettings, MemoryPrefixIndex
from kvgate.index.event_feed import EventFeed
from kvgate.proto.ids import Epoch, WorkerId
from kvgate.workers.engine import EngineConfig, SchedulingLimits
from kvgate.workers.service import WorkerConfig, WorkerServer
from tests.support.http_server import serve
from tests.workers.service.helpers import CACHE, eventually

MODEL = "tiny"
CONTEXT = 1536
KEYS = {"acme": "kvg-acme-key", "beta": "kvg-beta-key"}
RING = KeyRing([(hash_key(key), Tenant(name)) for name, key in KEYS.items()])
WORDS = (
    "alpha bravo cedar delta ember fjord grove harbor island jetty kelp lagoon meadow north orchard".split()  # noqa: SIM905
)


def text(chars: int, seed: int) -> str:
    """About ``chars`` characters of distinct prose (one byte token each)."""
    rng = np.random.default_rng(seed)
    out = ""
    while len(out) < chars:
        out += " ".join(rng.choice(WORDS, 8)) + ". "
    return out[:chars]


SYSTEM = text(880, seed=1)  # with the chat markers: ~900 tokens
STAMP = "Current time: 2025-06-01T12:34:56Z. "


@dataclass
class Stack:
    url: str
    gateway: Gateway
    tokenizer: Tokenizer
    index: MemoryPrefixIndex

    async def chat(self, system: str, tenant: str = "acme", **extra: Any) -> httpx.Response:
        messages = [{"role": "system", "content": system}, {"role": "user", "content": "Summarize."}]
        body = {"model": MODEL, "messages": messages, "max_tokens": 2} | extra
        async with httpx.AsyncClient(base_url=self.url, headers=_auth(tenant), timeout=60) as http:
            reply = await http.post("/v1/chat/completions", json=body)
        assert reply.status_code == 200, reply.text
        return reply

    async def diagnose(self, reply: httpx.Response, tenant: str = "acme") -> httpx.Response:
        async with httpx.AsyncClient(base_url=self.url, headers=_auth(tenant), timeout=60) as http:
            return await http.get(f"/v1/cache/diagnose/{reply.headers['x-request-id']}")

    async def report(self, reply: httpx.Response) -> dict[str, Any]:
        report = (await self.diagnose(reply)).json()
        assert report["cached_tokens"] == reply.json()["usage"]["prompt_tokens_details"]["cached_tokens"]
        assert report["prompt_tokens"] == reply.json()["usage"]["prompt_tokens"]
        return report

    def ids(self, system: str) -> np.ndarray:
        messages = [{"role": "system", "content": system}, {"role": "user", "content": "Summarize."}]
        return self.tokenizer.encode(self.tokenizer.apply_chat_template(messages), add_special_tokens=False)

    async def settled(self, system: str) -> None:
        """Waits until the index shows the prompt's whole chunks held (the workers' events arrived)."""
        chunks = len(self.ids(system)) // CACHE.chunk_size
        await eventually(lambda: self.index.size >= chunks)


def _auth(tenant: str) -> dict[str, str]:
    return {"authorization": f"Bearer {KEYS[tenant]}"}


def _long_context_model(tiny: Path, folder: Path) -> Path:
    """The tiny chat model with room for a ~900-token prompt (its weights do not depend on it)."""
    shutil.copytree(tiny, folder)
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps(config | {"max_position_embeddings": CONTEXT * 2}))
    return folder


@contextlib.asynccontextmanager
async def running(
    tiny_chat_model: Path, tmp_path: Path, ttl_s: float = 600.0, workers: int = 2
) -> AsyncIterator[Stack]:
    """The stack; with one worker, routing cannot send a request away from what it holds (with two, the
    policy may place a prompt that is mostly new elsewhere: ``routed_elsewhere``, diagnosed as such)."""
    model = _long_context_model(tiny_chat_model, tmp_path / "model")
    engine = EngineConfig(CACHE, num_gpu_blocks=512, max_model_len=CONTEXT, ttl_s=ttl_s,
                          limits=SchedulingLimits(max_num_seqs=4))  # fmt: skip
    index = MemoryPrefixIndex(IndexSettings(), SystemClock())
    feed = EventFeed(index, poll_s=0.1, secret=CACHE.secret)
    servers = [WorkerServer(None) for _ in range(workers)]
    try:
        for i, server in enumerate(servers):
            periods = {"heartbeat_s": 0.1, "idle_tick_s": 0.2, "torch_threads": 1, "shutdown_grace_s": 1.0}
            await server.start(WorkerConfig(model, engine, WorkerId(f"worker-{i}"), Epoch(1), **periods))
            feed.follow(server.info.address)
        tokenizer = load_tokenizer(model)
        limits = Limits(context_window=CONTEXT, max_output_tokens=8, request_timeout_s=60)
        gateway = build_gateway(
            GatewaySettings(MODEL, CACHE, limits=limits, keys=RING), index, tokenizer, 0.1
        )
        async with serve(gateway.app) as url:
            await eventually(lambda: gateway.dispatcher.routable_count() == workers)
            yield Stack(url, gateway, tokenizer, index)
    finally:
        await feed.close()
        for server in reversed(servers):
            await server.stop()


def _divergence(a: np.ndarray, b: np.ndarray) -> int:
    n = min(len(a), len(b))
    differ = np.flatnonzero(np.asarray(a[:n]) != np.asarray(b[:n]))
    return int(differ[0]) if differ.size else n


async def test_a_timestamp_near_token_300_is_changed_content_in_its_chunk(
    tiny_chat_model: Path, tmp_path: Path
) -> None:
    stamped = SYSTEM[:290] + STAMP + SYSTEM[290:]
    async with running(tiny_chat_model, tmp_path, workers=1) as stack:
        assert 850 <= len(stack.ids(SYSTEM)) <= 950
        await stack.chat(SYSTEM)
        await stack.settled(SYSTEM)
        reply = await stack.chat(stamped)
        report = await stack.report(reply)
    parts_at = _divergence(stack.ids(SYSTEM), stack.ids(stamped))
    assert report["cause"] == "changed_content"
    assert report["first_divergent_token"] == parts_at
    assert report["first_divergent_token"] // CACHE.chunk_size == 300 // CACHE.chunk_size
    assert report["cached_tokens"] >= 256  # the two whole chunks before the change were reused
    assert "2025-06-01" in report["evidence"]["excerpt"]
    assert "2025-06-01" in report["detail"]


async def test_two_halves_swapped_are_reordered_and_a_repeat_is_a_hit(
    tiny_chat_model: Path, tmp_path: Path
) -> None:
    swapped = SYSTEM[440:] + SYSTEM[:440]
    async with running(tiny_chat_model, tmp_path) as stack:
        first = await stack.chat(SYSTEM)
        assert (await stack.report(first))["cause"] == "new_prefix"
        await stack.settled(SYSTEM)
        again = await stack.chat(SYSTEM)
        repeat = await stack.report(again)
        moved = await stack.report(await stack.chat(swapped))
    assert (repeat["cause"], repeat["first_divergent_token"]) == ("hit", None)
    assert repeat["cached_tokens"] >= 7 * CACHE.chunk_size
    assert moved["cause"] == "reordered"
    assert moved["evidence"]["similar_request"] in {r.headers["x-request-id"] for r in (first, again)}


async def test_a_repeat_after_the_ttl_is_evicted_by_ttl(tiny_chat_model: Path, tmp_path: Path) -> None:
    async with running(tiny_chat_model, tmp_path, ttl_s=1.0) as stack:
        await stack.chat(SYSTEM)
        await stack.settled(SYSTEM)
        await eventually(lambda: stack.index.size == 0)  # expired on the worker, and the index heard it
        await eventually(lambda: any(w.load.evicted_ttl_blocks for w in stack.gateway.directory.known()))
        report = await stack.report(await stack.chat(SYSTEM))
    assert (report["cause"], report["evidence"]["eviction"]) == ("evicted", "ttl")
    assert report["cached_tokens"] == 0


async def test_another_salt_is_a_different_scope_and_another_tenant_gets_404(
    tiny_chat_model: Path, tmp_path: Path
) -> None:
    async with running(tiny_chat_model, tmp_path) as stack:
        await stack.chat(SYSTEM, cache_salt="team-a")
        await stack.settled(SYSTEM)
        reply = await stack.chat(SYSTEM, cache_salt="team-b")
        report = await stack.report(reply)
        theirs = await stack.diagnose(reply, tenant="beta")
    assert report["cause"] == "different_scope"
    assert report["evidence"]["scope_differences"] == ["cache_salt"]
    assert theirs.status_code == 404
    assert theirs.json()["error"]["code"] == "request_not_found"
