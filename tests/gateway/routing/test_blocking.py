"""A prefill is charged for the waiting it imposes on the requests that come for its worker's cache
(``draw_weight`` x their rate x prefill seconds^2 / 2): a long new prompt goes where few requests
need the cache; a short prefill is hardly charged; full caches fade the charge."""

from __future__ import annotations

import random
from collections import Counter

import numpy as np
import pytest

from kvgate.common.clock import SystemClock
from kvgate.gateway.routing import RouteReason, RouteRequest, get_policy
from kvgate.gateway.routing.config import RoutingConfig
from kvgate.gateway.routing.draw import CacheDraw
from kvgate.gateway.routing.kvgate_policy import KvgatePolicy
from kvgate.gateway.routing.router import Router
from kvgate.index import PrefixIndex
from kvgate.proto.events import EventBatch, KVEvent
from kvgate.proto.hashing import chunk_hashes
from kvgate.proto.ids import SeqNo, Tier, WorkerId
from kvgate.proto.units import BlockCount
from kvgate.proto.workers import WorkerLoad
from tests.gateway.routing.test_grouped_choice import _case, alike
from tests.gateway.routing.test_policies import CHUNK, cand
from tests.gateway.routing.test_router import ROOT, WORKERS, index, prompt  # noqa: F401 (index: a fixture)
from tests.index.helpers import info

A, B = WorkerId("a"), WorkerId("b")
LONG = 400 * CHUNK  # 51,200 tokens: 5.1 s of prefill at the default rate


def long_new_prompt(draw: dict[WorkerId, float], key: int, free: int = 50) -> RouteRequest:
    """A prompt no worker holds any of, both workers idle; ``draw``: requests per second that
    came for each one's cache lately; ``free``: GPU blocks free of 100 (0: the caches are full)."""
    candidates = (cand("a", free=free), cand("b", free=free))
    return RouteRequest(LONG, CHUNK, candidates, 0, key, draw=draw.__getitem__)


def test_a_long_new_prompt_goes_where_few_requests_come_for_the_cache() -> None:
    keys = range(40)
    charged = Counter(
        get_policy("kvgate").choose(long_new_prompt({A: 1.0, B: 0.0}, k)).worker_id for k in keys
    )
    assert charged == {B: 40}
    free = KvgatePolicy(RoutingConfig(draw_weight=0.0))
    uncharged = Counter(free.choose(long_new_prompt({A: 1.0, B: 0.0}, k)).worker_id for k in keys)
    assert uncharged[A] >= 5
    assert uncharged[B] >= 5


def test_the_charge_grows_with_the_draw_not_its_mere_presence() -> None:
    # a took 1% more draw than b: 0.005 x 0.25 x 5.1^2 s is far inside the near-tie window
    decisions = Counter(
        get_policy("kvgate").choose(long_new_prompt({A: 0.101, B: 0.1}, k)).worker_id for k in range(40)
    )
    assert decisions[A] >= 5
    assert decisions[B] >= 5


def test_a_short_prefill_on_a_busy_cache_is_hardly_charged() -> None:
    # a holds the 40 chunks of a document that many requests come for; this reader's question adds
    # one chunk: its prefill is short, so it stays on a however much a is asked for
    candidates = (cand("a", "G" * 40), cand("b"))
    request = RouteRequest(41 * CHUNK, CHUNK, candidates, 0, 3, draw={A: 50.0, B: 0.0}.__getitem__)
    decision = get_policy("kvgate").choose(request)
    assert (decision.worker_id, decision.reason) == ("a", RouteReason.CACHE_HIT)


def test_full_caches_fade_the_charge() -> None:
    # every GPU tier full: concentrating new content on the least-asked caches would churn them
    keys = range(40)
    full = Counter(
        get_policy("kvgate").choose(long_new_prompt({A: 1.0, B: 0.0}, k, free=0)).worker_id for k in keys
    )
    assert full[A] >= 5
    assert full[B] >= 5


def test_the_draw_weight_is_validated() -> None:
    with pytest.raises(ValueError, match="draw_weight"):
        RoutingConfig(draw_weight=-0.5)


def test_the_draw_counts_requests_for_a_cache_and_decays() -> None:
    now = [0.0]
    draw = CacheDraw(60.0, monotonic=lambda: now[0])
    for _ in range(10):
        draw.record(A, 512)
    draw.record(B, 0)  # placed as new content: not a request for b's cache
    assert draw.rate(B) == 0.0
    fresh = draw.rate(A)
    assert fresh == pytest.approx(10 * np.log(2) / 60)
    now[0] = 60.0
    assert draw.rate(A) == pytest.approx(fresh / 2)
    draw.forget(A)
    assert draw.rate(A) == 0.0


@pytest.mark.parametrize("seed", range(3))
def test_grouped_decisions_charge_blocking_as_per_worker_decisions_do(seed: int) -> None:
    """Random fleets and draws: the cohort path (which skips members by an upper bound on the best
    score) decides exactly as the per-worker path, and some decisions differ from uncharged ones."""
    policy, free = KvgatePolicy(), KvgatePolicy(RoutingConfig(draw_weight=0.0))
    rng = random.Random(seed)
    moved = 0
    for _ in range(400):
        slow, grouped = _case(rng)
        rates = {c.worker_id: rng.choice((0.0, 1.0, 20.0, 200.0)) for c in slow.candidates}
        slow, grouped = alike(policy, slow, grouped, draw=rates.__getitem__)
        decision = policy.choose(slow)
        assert policy.choose_grouped(grouped) == decision
        moved += decision != free.choose(slow)
    assert moved >= 10


async def test_long_new_prompts_leave_the_holder_of_a_document_many_read(
    index: PrefixIndex,  # noqa: F811 (the fixture)
) -> None:
    """Through the router: 30 readers' questions over one document go to its holder (cache hits,
    which the router counts); then long new prompts, previewed, avoid that holder. Without the
    charge some of them land there. (No placement handicap in either: the questions are new
    content the holder took, which that handicap alone would count against it.)"""
    charged = KvgatePolicy(RoutingConfig(placement_weight=0.0))
    assert (await _long_prompts_after_reads(index, charged, 0))["holder"] == 0
    free = KvgatePolicy(RoutingConfig(placement_weight=0.0, draw_weight=0.0))
    places = await _long_prompts_after_reads(index, free, 1)
    assert places["holder"] >= 1, places


async def _long_prompts_after_reads(
    prefix_index: PrefixIndex, policy: KvgatePolicy, seed: int
) -> Counter[str]:
    """Where 12 long new prompts would go after 30 reads of document ``seed`` on its holder:
    counts of "holder" and "other"."""
    router = Router(prefix_index, policy, get_policy("least_loaded"), CHUNK, 2, SystemClock())
    for worker in WORKERS:
        room = WorkerLoad(gpu_blocks_total=BlockCount(65_536), gpu_blocks_free=BlockCount(65_536))
        assert await prefix_index.heartbeat(worker, info(worker).epoch, room)
    workers = await prefix_index.workers()
    document = prompt(500 + seed, 40 * CHUNK)
    holder = WORKERS[seed % len(WORKERS)]
    until = SystemClock().now_ms() + 600_000
    held = tuple(KVEvent.stored(h, Tier.GPU, until) for h in chunk_hashes(document, ROOT, CHUNK))
    assert (await prefix_index.apply(EventBatch(holder, info(holder).epoch, SeqNo(1), held))).ok
    for reader in range(30):
        question = np.concatenate([document, prompt(600 + 100 * seed + reader, CHUNK)])
        routed = await router.route(chunk_hashes(question, ROOT, CHUNK), len(question), workers, reader)
        await router.drain()
        router.prefill_done(routed)
        assert routed.decision.worker_id == holder, reader
    places: Counter[str] = Counter()
    for n in range(12):
        long = prompt(700 + 100 * seed + n, 2 * LONG)
        routed = await router.preview(chunk_hashes(long, ROOT, CHUNK), len(long), workers, n)
        places["holder" if routed.decision.worker_id == holder else "other"] += 1
    return places
