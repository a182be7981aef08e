"""A shared opening is copied to a second worker when its demand pays for the copy, and only then;
the router finds shared openings where the prompts it routed part ways, and counts their demand."""

from __future__ import annotations

import numpy as np
import pytest

from kvgate.common.clock import SystemClock
from kvgate.gateway.routing import RouteReason, get_policy
from kvgate.gateway.routing.charges import choice_weights
from kvgate.gateway.routing.config import RoutingConfig
from kvgate.gateway.routing.kvgate_policy import KvgatePolicy
from kvgate.gateway.routing.router import Router
from kvgate.gateway.routing.types import GroupedRequest, RouteRequest, SharedPrefix
from kvgate.index import IndexSettings, MemoryPrefixIndex
from kvgate.index.types import LookupResult, PrefixMatch
from kvgate.proto.hashing import HashRoot, chunk_hashes
from kvgate.proto.ids import WorkerId
from kvgate.proto.layout import DEFAULT_CHUNK_SIZE as CHUNK
from kvgate.proto.workers import WorkerLoad
from tests.gateway.routing.test_policies import cand
from tests.index.helpers import info

OPENING = 16 * CHUNK  # a 2k-token tool block every agent of a kind sends first
PROMPT = OPENING + 2 * CHUNK
BUSY = 4000  # prefill tokens queued on the holder: 0.4 s at 10k tokens/s


def decide(shared: SharedPrefix | None, config: RoutingConfig | None = None) -> tuple[str, RouteReason]:
    candidates = (cand("a", "G" * 16, waiting=BUSY), cand("b"), cand("c", waiting=BUSY))
    decision = KvgatePolicy(config or RoutingConfig()).choose(
        RouteRequest(PROMPT, CHUNK, candidates, 0, 1, shared=shared)
    )
    return decision.worker_id, decision.reason


def test_a_busy_holder_of_an_opening_in_demand_is_relieved_by_a_copy() -> None:
    # Copying 2k tokens costs 0.2 s of prefill against the holder's 0.4 s queue: at full compute
    # weight (x4 in all) the copy does not pay; spread over 400 recent uses it does.
    assert decide(SharedPrefix(OPENING, 400.0)) == ("b", RouteReason.HOT_PREFIX)


def test_without_demand_or_with_amortisation_off_the_holder_keeps_it() -> None:
    assert decide(None) == ("a", RouteReason.CACHE_HIT)
    assert decide(SharedPrefix(OPENING, 0.0)) == ("a", RouteReason.CACHE_HIT)
    assert decide(SharedPrefix(OPENING, 400.0), RoutingConfig(copy_amortisation=0)) == (
        "a",
        RouteReason.CACHE_HIT,
    )


def test_an_opening_worth_nothing_for_its_footprint_earns_no_copy_by_demand() -> None:
    # the same 400 uses, but the copy would take cache room worth as much as it serves
    assert decide(SharedPrefix(OPENING, 400.0, 0.0)) == ("a", RouteReason.CACHE_HIT)


def test_more_holders_need_more_demand_for_one_more_copy() -> None:
    policy = KvgatePolicy()
    request = RouteRequest(PROMPT, CHUNK, (cand("a"),), shared=SharedPrefix(OPENING, 40.0))
    by_holders = [choice_weights(policy.config, request, holders, 0.0)[1] for holders in (1, 4)]
    assert by_holders[0] < by_holders[1] < policy.config.compute_weight


def test_the_grouped_decision_copies_alike() -> None:
    policy = KvgatePolicy()
    candidates = (cand("a", "G" * 16, waiting=BUSY), cand("b"), cand("c", waiting=BUSY))
    slow = RouteRequest(PROMPT, CHUNK, candidates, 0, 1, shared=SharedPrefix(OPENING, 400.0))
    lookup = LookupResult(PROMPT // CHUNK, {WorkerId("a"): PrefixMatch(WorkerId("a"), "G" * 16)})
    bare = tuple(type(c)(c.worker_id, c.load, None, c.inflight_tokens) for c in candidates)
    grouped = GroupedRequest(
        PROMPT, CHUNK, bare, {c.worker_id: i for i, c in enumerate(bare)},
        tuple(policy.queue_s(c) for c in bare), lookup.cohorts, 0, 1, shared=SharedPrefix(OPENING, 400.0),
    )  # fmt: skip
    assert policy.choose_grouped(grouped) == policy.choose(slow)
    assert policy.choose(slow).reason is RouteReason.HOT_PREFIX


class Recording(KvgatePolicy):
    """The default policy, keeping the shared opening of each request it was asked about."""

    def __init__(self) -> None:
        super().__init__()
        object.__setattr__(self, "seen", [])

    def choose_grouped(self, request: GroupedRequest):  # type: ignore[no-untyped-def]
        self.seen.append(request.shared)  # type: ignore[attr-defined]
        return super().choose_grouped(request)


async def _index(gpu_blocks: int) -> MemoryPrefixIndex:
    idx = MemoryPrefixIndex(IndexSettings(namespace="hot-prefix", timeout_s=2), SystemClock())
    for worker in ("w0", "w1"):
        await idx.register(
            info(WorkerId(worker)), WorkerLoad(gpu_blocks_total=gpu_blocks, gpu_blocks_free=gpu_blocks)
        )
    return idx


async def _openings_seen(gpu_blocks: int) -> list[SharedPrefix | None]:
    """The shared openings the policy was shown for four agent tasks of one kind (a 2k-token tool
    block, then each task's own content), over two workers of ``gpu_blocks`` 16-token blocks."""
    index = await _index(gpu_blocks)
    policy = Recording()
    router = Router(index, policy, get_policy("least_loaded"), CHUNK, 2, SystemClock())
    root = HashRoot(b"", "m").digest()
    rng = np.random.default_rng(0)
    tools = rng.integers(0, 50_000, OPENING).astype(np.uint32)
    workers = await index.workers()
    for task in range(4):
        own = rng.integers(0, 50_000, 3 * CHUNK).astype(np.uint32)
        prompt = np.concatenate([tools, own])
        await router.route(chunk_hashes(prompt, root, CHUNK), len(prompt), workers, task)
    return policy.seen  # type: ignore[attr-defined]


async def test_the_router_finds_the_opening_where_prompts_part_and_counts_its_demand() -> None:
    seen = await _openings_seen(gpu_blocks=1_000_000)  # 16M tokens: the opening's footprint is nil
    assert seen[0] is None  # nothing seen yet
    assert seen[1] is None  # the prompts part ways here: seen once it is recorded
    assert [s.tokens for s in seen[2:]] == [OPENING, OPENING]  # the tool block, not the tasks' own
    assert seen[2].uses == pytest.approx(0, abs=0.01)  # the first request through a known branch
    assert seen[3].uses == pytest.approx(1, abs=0.01)


async def test_an_opening_that_fills_much_of_a_cache_earns_no_copy_by_demand() -> None:
    # 2,048 tokens in a 40,960-token GPU tier: a twentieth, so the demand counts half
    half = (await _openings_seen(gpu_blocks=2_560))[3]
    assert (half.uses, half.worth) == (pytest.approx(1, abs=0.01), pytest.approx(0.5))
    # a tenth or more: a copy would evict as much as it serves
    assert (await _openings_seen(gpu_blocks=1_280))[3].worth == 0
