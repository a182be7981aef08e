"""Warm-ups: a hot shared opening held by fewer workers than its demand wants is copied, off the
request path, to the idle worker that took the least new content; never when it is off, for a short
or unheld opening, onto a busy worker, twice in the cooldown, or into full caches."""

from __future__ import annotations

import numpy as np

from kvgate.common.clock import ManualClock, SystemClock
from kvgate.gateway.routing import get_policy
from kvgate.gateway.routing.config import RoutingConfig
from kvgate.gateway.routing.fleet import Fleet
from kvgate.gateway.routing.kvgate_policy import KvgatePolicy
from kvgate.gateway.routing.router import Router
from kvgate.gateway.routing.types import RoutingPolicy, SharedPrefix, WarmUp
from kvgate.gateway.routing.warmups import WarmUpPlanner
from kvgate.index import IndexSettings, MemoryPrefixIndex
from kvgate.proto.hashing import HashRoot, chunk_hashes
from kvgate.proto.ids import ChunkHash, WorkerId
from kvgate.proto.layout import DEFAULT_CHUNK_SIZE as CHUNK
from kvgate.proto.workers import WorkerLoad
from tests.gateway.routing.test_policies import cand
from tests.index.helpers import info

END = ChunkHash(b"\x01" * 16)
OPENING = 16 * CHUNK
ON = RoutingConfig(warm_demand=10.0)
INTAKE = {"a": 5.0, "b": 3.0, "c": 1.0, "d": 2.0}.__getitem__


def fleet(queues: dict[str, float]) -> Fleet:
    names = sorted(queues)
    candidates = tuple(cand(n) for n in names)
    return Fleet(
        candidates, {WorkerId(n): i for i, n in enumerate(names)}, tuple(queues[n] for n in names), {}
    )


IDLE = fleet({"a": 0.0, "b": 0.0, "c": 0.0, "d": 0.0})


def plan(
    uses: float,
    holders: set[str],
    config: RoutingConfig = ON,
    tokens: int = OPENING,
    full: float = 0.0,
    queues: Fleet = IDLE,
) -> WarmUp | None:
    planner = WarmUpPlanner(config, lambda: 0.0)
    shared = SharedPrefix(tokens, uses)
    return planner.plan(END, shared, full, queues, {WorkerId(h) for h in holders}, INTAKE)


def test_an_opening_in_demand_goes_to_the_idle_worker_that_took_the_least() -> None:
    # 25 recent uses at 10 per extra holder: 3 holders wanted, 1 has it
    assert plan(25.0, {"a"}) == WarmUp(WorkerId("c"), OPENING)
    assert plan(25.0, {"a", "c"}) == WarmUp(WorkerId("d"), OPENING)


def test_enough_holders_little_demand_or_full_caches_want_no_warm_up() -> None:
    assert plan(25.0, {"a", "b", "c"}) is None
    assert plan(9.0, {"a"}) is None  # 1 holder wanted
    assert plan(25.0, {"a"}, full=1.0) is None  # a copy would evict what later prompts reuse


def test_off_short_unheld_or_busy_means_none() -> None:
    assert plan(25.0, {"a"}, RoutingConfig(warm_demand=0.0)) is None  # warm_demand 0: off
    assert plan(25.0, {"a"}, tokens=256) is None  # under warm_min_tokens
    assert plan(25.0, set()) is None  # nothing to copy from: the next request computes it anyway
    busy = fleet({"a": 0.0, "b": 0.5, "c": 0.2, "d": 1.0})
    assert plan(25.0, {"a"}, queues=busy) is None


def test_one_warm_up_per_opening_per_cooldown() -> None:
    clock = ManualClock()
    planner = WarmUpPlanner(ON, lambda: clock.now_ms() / 1000)
    shared = SharedPrefix(OPENING, 50.0)

    def ask() -> WarmUp | None:
        return planner.plan(END, shared, 0.0, IDLE, {WorkerId("a")}, INTAKE)

    assert ask() == WarmUp(WorkerId("c"), OPENING)
    clock.advance(ON.warm_cooldown_s - 0.5)
    assert ask() is None
    other = planner.plan(ChunkHash(b"\x02" * 16), shared, 0.0, IDLE, {WorkerId("a")}, INTAKE)
    assert other is not None  # another opening is not held back
    clock.advance(1.0)
    assert ask() == WarmUp(WorkerId("c"), OPENING)


TOOL_TASKS = 4


async def route_tool_tasks(policy: RoutingPolicy) -> list[WarmUp | None]:
    """Agent tasks of one kind (a 2k-token tool block, then each task's own content) over three idle
    workers, routed with ``policy``: the warm-up each routing asked for. Each one's worker is checked
    to be other than the request's, and to be seen by the next lookup as holding the block."""
    index = MemoryPrefixIndex(IndexSettings(namespace="warm-ups", timeout_s=2), SystemClock())
    for worker in ("w0", "w1", "w2"):
        await index.register(
            info(WorkerId(worker)), WorkerLoad(gpu_blocks_total=10**6, gpu_blocks_free=10**6)
        )
    router = Router(index, policy, get_policy("least_loaded"), CHUNK, 2, SystemClock())
    root = HashRoot(b"", "m").digest()
    rng = np.random.default_rng(0)
    tools = rng.integers(0, 50_000, OPENING).astype(np.uint32)
    workers = await index.workers()
    warms = []
    for task in range(TOOL_TASKS):
        prompt = np.concatenate([tools, rng.integers(0, 50_000, 3 * CHUNK).astype(np.uint32)])
        hashes = chunk_hashes(prompt, root, CHUNK)
        routed = await router.route(hashes, len(prompt), workers, task)
        warms.append(routed.warm)
        if routed.warm is not None:
            warm = routed.warm
            assert warm.worker_id != routed.decision.worker_id
            assert warm.tokens == OPENING
            seen = await router.preview(hashes, len(prompt), workers, task + 10)
            assert seen.lookup is not None
            assert len(seen.lookup.matches[warm.worker_id].tiers) >= OPENING // CHUNK
    await router.drain()
    return warms


EAGER = RoutingConfig(warm_demand=0.5, warm_idle_s=10.0)


async def test_the_router_returns_a_warm_up_and_counts_its_worker_as_holding_the_opening() -> None:
    """Once the block is known as a shared opening with demand, the router asks a worker that does
    not hold it to warm it up, and the next lookup sees it pending there."""
    warms = await route_tool_tasks(KvgatePolicy(EAGER))
    assert warms[0] is None  # no shared opening known yet
    assert any(w is not None for w in warms)


async def test_a_peer_router_under_the_same_settings_asks_for_no_warm_up() -> None:
    """Warm-ups are kvgate's: the peers' routers, replayed for comparison, have no such path."""
    for name in ("sglang_cache_aware", "llmd_precise", "ray_serve_prefix", "dynamo_kv", "least_loaded"):
        assert await route_tool_tasks(get_policy(name, EAGER)) == [None] * TOOL_TASKS, name
