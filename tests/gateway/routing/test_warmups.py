"""Warm-ups: a hot shared opening held by fewer workers than its demand wants is copied, off the
request path, to the idle worker that took the least new content; never when it is off, for a short
or unheld opening, onto a busy worker, twice in the cooldown, or into full caches. With ``warm_busy``
on, an opening whose every holder is queued past its own prefill is copied too."""

from __future__ import annotations

import numpy as np
import pytest

from kvgate.common.clock import ManualClock, SystemClock
from kvgate.gateway.routing import get_policy
from kvgate.gateway.routing.config import RoutingConfig
from kvgate.gateway.routing.fleet import Fleet
from kvgate.gateway.routing.kvgate_policy import KvgatePolicy
from kvgate.gateway.routing.overrides import routing_config
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


BUSY_ON = RoutingConfig(warm_demand=10.0, warm_busy=1.0)
COPY_S = OPENING / BUSY_ON.prefill_tokens_per_s  # the opening's own prefill: 0.2 s


def test_an_opening_whose_holders_are_all_queued_past_its_prefill_is_warmed_when_busy_is_on() -> None:
    # 5 recent uses: one holder is all the demand wants; its queue is what asks for another
    busy = fleet({"a": 5.0, "b": 0.0, "c": 0.0, "d": 0.0})
    assert plan(5.0, {"a"}, BUSY_ON, queues=busy) == WarmUp(WorkerId("c"), OPENING)
    assert plan(5.0, {"a"}, queues=busy) is None  # warm_busy 0, the default: off
    short = fleet({"a": COPY_S * 0.9, "b": 0.0, "c": 0.0, "d": 0.0})
    assert plan(5.0, {"a"}, BUSY_ON, queues=short) is None  # waiting is sooner than copying
    late = fleet({"a": COPY_S * 1.1, "b": 0.0, "c": 0.0, "d": 0.0})
    assert plan(5.0, {"a"}, BUSY_ON, queues=late) == WarmUp(WorkerId("c"), OPENING)


def test_busy_holders_count_by_the_least_queue_and_the_room_the_caches_have() -> None:
    one_free = fleet({"a": 5.0, "b": 0.0, "c": 0.0, "d": 0.0})
    assert plan(5.0, {"a", "b"}, BUSY_ON, queues=one_free) is None  # holder b answers at once
    late = fleet({"a": COPY_S * 1.5, "b": 0.0, "c": 0.0, "d": 0.0})
    assert plan(5.0, {"a"}, BUSY_ON, queues=late, full=0.0) is not None
    assert plan(5.0, {"a"}, BUSY_ON, queues=late, full=0.5) is None  # a copy counts twice here
    assert plan(5.0, {"a"}, BUSY_ON, queues=fleet({"a": 60.0, "b": 0, "c": 0, "d": 0}), full=1.0) is None
    strict = RoutingConfig(warm_demand=10.0, warm_busy=2.0)
    assert plan(5.0, {"a"}, strict, queues=late) is None  # F 2: the queue must pass 2x the prefill


def test_warm_busy_is_validated_and_settable_from_the_command_line() -> None:
    with pytest.raises(ValueError, match="warm_busy must be >= 0"):
        RoutingConfig(warm_busy=-1.0)
    assert routing_config(["warm_busy=1.5"]).warm_busy == 1.5


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


LONG = 64 * CHUNK  # an 8k-token tool block: 0.8 s of prefill, weighed 3x more when copied


Choice = tuple[WorkerId, int]  # the worker a task went to, the tokens it reuses there


async def route_into_a_busy_holder(config: RoutingConfig) -> tuple[list[WarmUp | None], list[Choice]]:
    """Agent tasks sharing a long tool block: the first one's worker then reports 2 s of queued
    prefill, and the next task waits for it (a copy costs more than the wait) -- the warm-up each
    routing asked for, and the worker each task went to with the tokens it reuses there. Real
    router, real in-memory index."""
    index = MemoryPrefixIndex(IndexSettings(namespace="busy-holder", timeout_s=2), SystemClock())
    for worker in ("w0", "w1", "w2"):
        await index.register(
            info(WorkerId(worker)), WorkerLoad(gpu_blocks_total=10**6, gpu_blocks_free=10**6)
        )
    router = Router(index, KvgatePolicy(config), get_policy("least_loaded"), CHUNK, 2, SystemClock())
    root = HashRoot(b"", "m").digest()
    rng = np.random.default_rng(1)
    tools = rng.integers(0, 50_000, LONG).astype(np.uint32)
    warms: list[WarmUp | None] = []
    chosen: list[Choice] = []
    for task in range(4):
        prompt = np.concatenate([tools, rng.integers(0, 50_000, 3 * CHUNK).astype(np.uint32)])
        hashes = chunk_hashes(prompt, root, CHUNK)
        routed = await router.route(hashes, len(prompt), await index.workers(), task)
        warms.append(routed.warm)
        worker = routed.decision.worker_id
        chosen.append((worker, routed.decision.predicted_cached_tokens))
        if task == 0:
            queued = WorkerLoad(waiting_prefill_tokens=20_000, gpu_blocks_total=10**6, gpu_blocks_free=10**6)
            assert await index.heartbeat(worker, info(worker).epoch, queued)
    await router.drain()
    return warms, chosen


async def test_the_router_warms_a_busy_holders_opening_onto_an_idle_worker_when_busy_is_on() -> None:
    warms, chosen = await route_into_a_busy_holder(RoutingConfig(warm_demand=1e9, warm_busy=1.0))
    holder = chosen[0][0]
    assert chosen[1] == (holder, LONG)  # the task waited for the holder: copying the block was dearer
    asked = {w.worker_id for w in warms if w is not None and w.tokens == LONG}
    assert asked, "no warm-up asked for while every holder was queued past the block's prefill"
    assert holder not in asked
    moved = [(w, cached) for w, cached in chosen[2:] if w != holder]
    assert moved
    assert all(w in asked and cached >= LONG for w, cached in moved)  # they found the copy
    off_warms, off_chosen = await route_into_a_busy_holder(RoutingConfig(warm_demand=1e9))
    assert off_warms == [None] * 4  # warm_busy 0 (the default), and the demand wants no second holder
    assert all(cached < LONG for w, cached in off_chosen if w != holder)  # a task that moved copied it
