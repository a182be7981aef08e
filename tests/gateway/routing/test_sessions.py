"""New sessions spread by the new content each worker took lately (``session_weight`` x the share of
its prefill capacity that new content took); their follow-ups are never charged and stay where their
content is."""

from __future__ import annotations

import dataclasses
import random
from collections import Counter

import numpy as np
import pytest

from kvgate.common.clock import SystemClock
from kvgate.gateway.routing import RouteReason, RouteRequest, get_policy
from kvgate.gateway.routing.config import RoutingConfig
from kvgate.gateway.routing.kvgate_policy import KvgatePolicy
from kvgate.gateway.routing.router import Router
from kvgate.gateway.routing.types import SharedPrefix
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
OPENING = SharedPrefix(8 * CHUNK, 0.0)  # a system prompt that conversations have branched from
PREFILL = RoutingConfig().prefill_tokens_per_s
COMPUTING = RoutingConfig(kv_fetch_min_tokens=0)  # no KV sources: a worker computes what it lacks


def new_session(holder_tiers: str, busy: dict[WorkerId, float]) -> RouteRequest:
    """A 10-chunk prompt over an 8-chunk shared opening: ``a`` holds ``holder_tiers`` of it, ``b``
    nothing; both idle now. ``busy``: the share of each one's prefill capacity that new content
    took lately."""
    candidates = (cand("a", holder_tiers), cand("b"))
    intake = {w: share * PREFILL for w, share in busy.items()}.__getitem__
    return RouteRequest(10 * CHUNK, CHUNK, candidates, 0, 7, shared=OPENING, intake=intake)


def test_a_new_session_leaves_the_opening_s_holder_that_took_the_most_new_content() -> None:
    request = new_session("G" * 8, {A: 0.5, B: 0.0})
    decision = get_policy("kvgate").choose(request)
    assert (decision.worker_id, decision.reason) == ("b", RouteReason.LOAD_OVERRIDE)
    assert decision.predicted_cached_tokens == 0  # b copies the opening: what spreading costs
    off = get_policy("kvgate", RoutingConfig(session_weight=0.0)).choose(request)
    assert off.worker_id == "a"  # without the charge the copy is not worth it


def test_the_charge_follows_the_share_not_the_mere_presence_of_new_content() -> None:
    # b took nearly as much new content lately: 0.01 x the weight is less than copying the opening
    # costs (0.1 s of prefill, weighted, where workers compute it: no KV sources); and a worker that
    # took little is not worth leaving either
    policy = get_policy("kvgate", COMPUTING)
    assert policy.choose(new_session("G" * 8, {A: 0.5, B: 0.49})).worker_id == "a"
    assert policy.choose(new_session("G" * 8, {A: 0.01, B: 0.0})).worker_id == "a"
    # fetched from a instead (at twice the prefill rate), the copy costs half: b's 0.01 pays for it
    assert get_policy("kvgate").choose(new_session("G" * 8, {A: 0.5, B: 0.49})).worker_id == "b"


def test_an_opening_that_fills_much_of_a_cache_is_not_worth_spreading_sessions_over() -> None:
    # the same new session as above, but its opening is worth nothing once the cache room a copy
    # takes is counted (a long document on small caches): spreading it would evict more than it gains
    session = new_session("G" * 8, {A: 0.5, B: 0.0})
    request = dataclasses.replace(session, shared=SharedPrefix(8 * CHUNK, 0.0, 0.0))
    assert get_policy("kvgate").choose(request).worker_id == "a"
    halved = dataclasses.replace(request, shared=SharedPrefix(8 * CHUNK, 0.0, 0.5))
    assert get_policy("kvgate").choose(halved).worker_id == "b"


def test_a_follow_up_is_not_charged() -> None:
    # a holds the opening and the session's own first chunk: a later turn, whatever a took lately
    decision = get_policy("kvgate").choose(new_session("G" * 9, {A: 0.9, B: 0.0}))
    assert (decision.worker_id, decision.reason) == ("a", RouteReason.CACHE_HIT)


def test_the_session_weight_is_validated() -> None:
    with pytest.raises(ValueError, match="session_weight"):
        RoutingConfig(session_weight=-1.0)


@pytest.mark.parametrize("seed", range(3))
def test_grouped_decisions_charge_sessions_as_per_worker_decisions_do(seed: int) -> None:
    """Random fleets and shares: the cohort path scores charged sessions exactly as the per-worker
    path, and some of the cases are charged ones decided against the charge-free choice."""
    policy, free = KvgatePolicy(), KvgatePolicy(RoutingConfig(session_weight=0.0))
    rng = random.Random(seed)
    moved = 0
    for _ in range(400):
        slow, grouped = _case(rng)
        intake = {c.worker_id: rng.choice((0.0, 500.0, 3000.0, 9000.0)) for c in slow.candidates}
        shares = {w: rate / max(max(intake.values()), 1.0) for w, rate in intake.items()}
        slow, grouped = alike(policy, slow, grouped, placed=shares.__getitem__, intake=intake.__getitem__)
        decision = policy.choose(slow)
        assert policy.choose_grouped(grouped) == decision
        moved += decision != free.choose(slow)
    assert moved >= 20


async def test_new_conversations_over_one_system_prompt_spread_and_their_turns_stay(
    index: PrefixIndex,  # noqa: F811 (the fixture)
) -> None:
    """Twelve conversations open on one system prompt, one after another, each with 8k tokens of
    its own and reported held by its worker once computed, where workers compute what they lack
    (no KV sources): with the charge the system prompt's holder soon counts as busy and they open
    on several workers, and every second turn goes back to its own; without it, all of them stay
    on the system prompt's first holder."""
    seq: Counter[WorkerId] = Counter()  # each worker's event stream, across the runs
    starts = await _open_conversations(index, KvgatePolicy(COMPUTING), 0, seq)
    assert len(set(starts.values())) >= 3, starts
    alone = dataclasses.replace(COMPUTING, session_weight=0.0)
    piled = await _open_conversations(index, KvgatePolicy(alone), 1, seq)
    assert len(set(piled.values())) == 1, piled
    # workers that have not reported their GPU tier: the opening's footprint is unknown, nothing
    # is copied on a guess
    unknown = await _open_conversations(index, KvgatePolicy(COMPUTING), 2, seq, gpu_blocks=0)
    assert len(set(unknown.values())) == 1, unknown


async def _open_conversations(
    prefix_index: PrefixIndex, policy: KvgatePolicy, seed: int, seq: Counter[WorkerId],
    gpu_blocks: int = 65_536,
) -> dict[int, WorkerId]:  # fmt: skip
    """Where each of 12 conversations over system prompt ``seed`` opened, every worker reporting a
    GPU tier of ``gpu_blocks`` (by default 1M tokens: the system prompt is a small part of it);
    asserts each second turn went there too."""
    router = Router(prefix_index, policy, get_policy("least_loaded"), CHUNK, 2, SystemClock())
    for worker in WORKERS:
        room = WorkerLoad(gpu_blocks_total=BlockCount(gpu_blocks), gpu_blocks_free=BlockCount(gpu_blocks))
        assert await prefix_index.heartbeat(worker, info(worker).epoch, room)
    workers = await prefix_index.workers()
    system = prompt(seed, 8 * CHUNK)

    async def served(conversation: np.ndarray, key: int) -> WorkerId:
        hashes = chunk_hashes(conversation, ROOT, CHUNK)
        routed = await router.route(hashes, len(conversation), workers, request_key=key)
        await router.drain()
        router.prefill_done(routed)
        worker = routed.decision.worker_id
        seq[worker] += 1  # the worker reports what it now holds, as its event stream would
        until = SystemClock().now_ms() + 600_000
        events = tuple(KVEvent.stored(h, Tier.GPU, until) for h in hashes)
        held = EventBatch(worker, info(worker).epoch, SeqNo(seq[worker]), events)
        assert (await prefix_index.apply(held)).ok
        return worker

    base = 1000 * (seed + 1)
    firsts = {c: np.concatenate([system, prompt(base + c, 64 * CHUNK)]) for c in range(12)}
    starts = {c: await served(first, c) for c, first in firsts.items()}
    for c, first in firsts.items():
        second = np.concatenate([first, prompt(base + 100 + c, 2 * CHUNK)])
        assert await served(second, 100 + c) == starts[c], c
    return starts
