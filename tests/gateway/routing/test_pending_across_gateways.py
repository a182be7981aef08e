"""Gateway replicas share a long prompt's pending run: a prompt queued or prefilling for longer
than ``pending_ttl_s`` is still being computed on its worker, and another gateway that gets the
same prompt meanwhile follows it there instead of computing it again elsewhere."""

from __future__ import annotations

from collections.abc import AsyncIterator

import numpy as np
import pytest

from kvgate.common.clock import ManualClock
from kvgate.gateway.routing import RouteReason, get_policy
from kvgate.gateway.routing.router import Router
from kvgate.index import IndexSettings, PrefixIndex
from kvgate.proto.hashing import HashRoot, chunk_hashes
from kvgate.proto.layout import DEFAULT_CHUNK_SIZE as CHUNK
from tests.gateway.routing.test_router import WORKERS, routing_index
from tests.index.helpers import LOAD, info

ROOT = HashRoot(b"", "m").digest()
TOKENS = 60_000  # about 6 s of prefill at the cost model's 10k tokens/s, on an idle worker


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture(params=["memory", pytest.param("redis", marks=pytest.mark.redis)])
async def index(request: pytest.FixtureRequest, clock: ManualClock) -> AsyncIterator[PrefixIndex]:
    async with routing_index(request, clock) as idx:
        yield idx


def _gateway(index: PrefixIndex, clock: ManualClock) -> Router:
    pending_ttl_s = IndexSettings().pending_ttl_s
    return Router(index, get_policy("kvgate"), get_policy("least_loaded"), CHUNK, pending_ttl_s, clock)


async def test_another_gateway_follows_a_long_prompt_to_its_worker_until_it_is_computed(
    index: PrefixIndex, clock: ManualClock
) -> None:
    tokens = np.random.default_rng(7).integers(0, 50_000, TOKENS).astype(np.uint32)
    hashes = chunk_hashes(tokens, ROOT, CHUNK)
    first, second = _gateway(index, clock), _gateway(index, clock)
    routed = await first.route(hashes, TOKENS, await index.workers(), request_key=1)
    await first.drain()
    wait_s = routed.decision.estimated_ttft_s
    assert routed.decision.reason is RouteReason.NEW_PREFIX
    assert wait_s is not None
    assert wait_s > IndexSettings().pending_ttl_s + 2  # still prefilling after the bare TTL

    clock.advance(IndexSettings().pending_ttl_s + 1)
    follower = await second.route(hashes, TOKENS, await index.workers(), request_key=2)
    assert (follower.decision.worker_id, follower.decision.reason) == (
        routed.decision.worker_id,
        RouteReason.CACHE_HIT,
    )
    assert follower.decision.predicted_cached_tokens == len(hashes) * CHUNK

    clock.advance(wait_s)  # long past the prefill: a hint no longer, nothing was stored
    for worker in WORKERS:
        assert await index.heartbeat(worker, info(worker).epoch, LOAD.__class__())
    late = await _gateway(index, clock).route(hashes, TOKENS, await index.workers(), request_key=3)
    assert late.decision.reason is RouteReason.NEW_PREFIX
