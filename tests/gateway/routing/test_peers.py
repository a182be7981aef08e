"""The peers' routers as the simulator runs them: each behaves as its project documents it."""

from __future__ import annotations

from collections import Counter

import pytest
import xxhash

from kvgate.gateway.routing import RouteReason, RouteRequest, get_policy
from kvgate.gateway.routing.peers.dynamo import DynamoKv, DynamoParams
from kvgate.gateway.routing.peers.llmd import LlmdPrecise
from kvgate.gateway.routing.peers.ray_serve import RayServeParams, RayServePrefixAffinity
from kvgate.gateway.routing.peers.routed_tree import RoutedTree
from kvgate.gateway.routing.peers.sglang import SGLangCacheAware, SGLangParams
from kvgate.gateway.routing.types import LearningPolicy
from kvgate.proto.ids import ChunkHash, WorkerId
from tests.gateway.routing.test_policies import CHUNK, cand

A, B, C = WorkerId("a"), WorkerId("b"), WorkerId("c")


def chain(*ids: int) -> tuple[ChunkHash, ...]:
    """Chunk hashes of a prompt whose chunks are ``ids``: each commits to the ones before it."""
    out: list[ChunkHash] = []
    for i in ids:
        out.append(ChunkHash(xxhash.xxh3_128_digest(b"".join(out[-1:]) + i.to_bytes(8, "little"))))
    return tuple(out)


def request(chunks: tuple[ChunkHash, ...], *candidates, key: int = 0) -> RouteRequest:  # type: ignore[no-untyped-def]
    return RouteRequest(len(chunks) * CHUNK, CHUNK, tuple(candidates), 0, key, chunks=chunks)


# -- the approximate tree -----------------------------------------------------------------------


def test_the_tree_matches_leading_runs_per_worker() -> None:
    tree = RoutedTree()
    tree.insert(chain(1, 2, 3, 4), A)
    tree.insert(chain(1, 2, 9), B)
    assert tree.matches(chain(1, 2, 3, 7)) == {A: 3, B: 2}
    assert tree.matches(chain(1, 2, 3, 4)) == {A: 4, B: 2}
    assert tree.matches(chain(5)) == {}
    assert (tree.size(A), tree.size(B), tree.size(C)) == (4, 3, 0)


def test_the_tree_evicts_least_recently_routed_leaves_first() -> None:
    tree = RoutedTree()
    tree.insert(chain(1, 2, 3), A)
    tree.insert(chain(1, 5), A)  # refreshes chunk 1: the old prompt's leaves are the oldest
    tree.evict_to(3)
    assert tree.matches(chain(1, 2, 3)) == {A: 2}
    assert tree.matches(chain(1, 5)) == {A: 2}
    tree.evict_to(1, above=2)  # 3 > 2 chunks: down to 1
    assert tree.size(A) == 1
    assert tree.matches(chain(1, 5)) == {A: 1}


# -- SGLang cache-aware ----------------------------------------------------------------------------


def test_sglang_follows_its_tree_above_the_cache_threshold() -> None:
    policy = SGLangCacheAware()
    policy.learn(chain(1, 2, 3, 4), B, 0)
    # 2 of 5 chunks routed to b (40% > 30%): b, though the index shows nothing there and b is busier
    decision = policy.choose(request(chain(1, 2, 7, 8, 9), cand("a"), cand("b", running=5)))
    assert (decision.worker_id, decision.reason) == ("b", RouteReason.CACHE_HIT)
    # 1 of 5 (20%): the smallest tree, a
    decision = policy.choose(request(chain(1, 6, 7, 8, 9), cand("a", running=5), cand("b")))
    assert (decision.worker_id, decision.reason) == ("a", RouteReason.LOAD_BALANCED)


def test_sglang_balances_only_when_both_thresholds_are_exceeded() -> None:
    policy = SGLangCacheAware()
    policy.learn(chain(1, 2, 3, 4), A, 0)
    prompt = chain(1, 2, 3, 4)
    # 80 more requests than b, but not 1.5x b's: still the tree's choice
    assert policy.choose(request(prompt, cand("a", running=250), cand("b", running=170))).worker_id == "a"
    decision = policy.choose(request(prompt, cand("a", running=100), cand("b", running=30)))
    assert (decision.worker_id, decision.reason) == ("b", RouteReason.LOAD_BALANCED)


def test_sglang_trims_its_trees_at_the_eviction_interval() -> None:
    # trees of 2 chunks (4 chars per token), trimmed every 10 s
    policy = SGLangCacheAware(params=SGLangParams(eviction_interval_s=10, max_tree_chars=2 * 4 * CHUNK))
    policy.learn(chain(1, 2, 3, 4), A, 0)
    policy.learn(chain(8), B, 9_000)
    prompt = chain(1, 2, 3, 4)
    assert policy._tree.matches(prompt) == {A: 4}
    policy.learn(chain(9), B, 10_000)
    assert policy._tree.matches(prompt) == {A: 2}


# -- Ray Serve PrefixCacheAffinityRouter ------------------------------------------------------------


def test_ray_serve_takes_the_shortest_queue_among_the_longest_matches() -> None:
    policy = RayServePrefixAffinity()
    policy.learn(chain(1, 2, 3), A, 0)
    policy.learn(chain(1, 2, 3), B, 0)
    policy.learn(chain(1, 2), C, 0)
    prompt = chain(1, 2, 3, 4, 5, 6, 7, 8, 9, 10)
    decision = policy.choose(request(prompt, cand("a", running=4), cand("b", running=2), cand("c")))
    assert (decision.worker_id, decision.reason) == ("b", RouteReason.CACHE_HIT)


def test_ray_serve_sends_weak_matches_to_the_smallest_tree() -> None:
    policy = RayServePrefixAffinity()
    policy.learn(chain(1, 2, 3, 4, 5), A, 0)
    policy.learn(chain(6), B, 0)
    prompt = chain(1, *range(20, 31))  # 1 of 12 chunks: under 10%
    decision = policy.choose(request(prompt, cand("a"), cand("b", running=3), cand("c", running=5)))
    assert (decision.worker_id, decision.reason) == ("c", RouteReason.LOAD_BALANCED)  # trees: 5, 1, 0


def test_ray_serve_falls_back_to_two_choices_when_queues_differ_by_more_than_the_threshold() -> None:
    policy = RayServePrefixAffinity()
    policy.learn(chain(1, 2), A, 0)
    candidates = (cand("a", running=20), cand("b", running=9), cand("c", running=14))
    picks = Counter(policy.choose(request(chain(1, 2), *candidates, key=k)).worker_id for k in range(200))
    assert set(picks) == {"b", "c"}  # the busiest never: two drawn, the shorter queue taken


def test_ray_serve_eviction_is_off_by_default_and_trims_large_trees_when_on() -> None:
    big = chain(*range(1, 1001))  # 128k tokens: over 400k characters
    off = RayServePrefixAffinity()
    on = RayServePrefixAffinity(params=RayServeParams(do_eviction=True))
    for policy in (off, on):
        policy.learn(big, A, 0)
    assert off._tree.size(A) == 1000
    assert on._tree.size(A) == 360_000 // (4 * CHUNK)


# -- Dynamo KV router ---------------------------------------------------------------------------------


def test_dynamo_weighs_prefill_against_decode_blocks_as_its_worked_example() -> None:
    """Dynamo's documented example: 10 prompt blocks; overlaps 2, 5, 8; decode blocks 10, 5, 9:
    costs 18, 10, 11 plus the prompt's own blocks everywhere -- worker 2 wins."""
    block = 16
    prompt = 10 * block
    candidates = (
        cand("w1", "GG", free=100 - 10),
        cand("w2", "GGGGG", free=100 - 5),
        cand("w3", "GGGGGGGG", free=100 - 9),
    )
    decision = DynamoKv().choose(RouteRequest(prompt, block, candidates))
    assert (decision.worker_id, decision.reason) == ("w2", RouteReason.CACHE_HIT)
    ignore_cache = DynamoKv(params=DynamoParams(overlap_score_weight=0.0))
    assert ignore_cache.choose(RouteRequest(prompt, block, candidates)).worker_id == "w2"  # least decode
    heavy = DynamoKv(params=DynamoParams(overlap_score_weight=3.0))
    assert heavy.choose(RouteRequest(prompt, block, candidates)).worker_id == "w3"  # 6 + 9 < 15 + 5


def test_dynamo_counts_stored_blocks_only_and_draws_among_equal_costs() -> None:
    # b's match is pending only (kvgate's own hint): Dynamo's index does not know it
    candidates = (cand("a"), cand("b", "PPPP"))
    picks = Counter(DynamoKv().choose(RouteRequest(8 * CHUNK, CHUNK, candidates, 0, k)).worker_id
                    for k in range(100))  # fmt: skip
    assert set(picks) == {"a", "b"}
    hot = DynamoKv(params=DynamoParams(temperature=1.0))
    candidates = (cand("a", "G" * 8), cand("b", waiting=100_000))
    picks = Counter(hot.choose(RouteRequest(8 * CHUNK, CHUNK, candidates, 0, k)).worker_id
                    for k in range(400))  # fmt: skip
    assert picks["a"] > picks["b"] > 0  # softmax: the cheaper mostly, the dearer sometimes


# -- llm-d precise prefix-cache scorer ------------------------------------------------------------


def test_llmd_normalises_prefix_hits_over_the_pods_that_have_one() -> None:
    policy = LlmdPrecise()
    # a: 8 blocks (1.0), b: 4 blocks (0.0, the lowest hit), c: none (0.0); queues and KV equal
    request_ = RouteRequest(16 * CHUNK, CHUNK, (cand("a", "G" * 8), cand("b", "G" * 4), cand("c")))
    assert policy.scores(request_) == pytest.approx([3 + 2 + 1, 0 + 2 + 1, 0 + 2 + 1])
    assert policy.choose(request_).worker_id == "a"


def test_llmd_lets_queue_and_kv_usage_outweigh_a_hit() -> None:
    policy = LlmdPrecise()
    # the only hit scores 3; b's empty queue (2) and free KV (2) beat a's full KV and long queue
    candidates = (cand("a", "G" * 8, queued=10, free=10), cand("b", free=100))
    assert policy.choose(RouteRequest(16 * CHUNK, CHUNK, candidates)).worker_id == "b"
    candidates = (cand("a", "G" * 8, queued=10, free=60), cand("b", free=100))
    assert policy.choose(RouteRequest(16 * CHUNK, CHUNK, candidates)).worker_id == "a"  # 3 + 0 + 1.2 > 4


@pytest.mark.parametrize("name", ["sglang_cache_aware", "ray_serve_prefix"])
def test_tree_keeping_peers_learn_through_the_router(name: str) -> None:
    assert isinstance(get_policy(name), LearningPolicy)
    assert not isinstance(get_policy("kvgate"), LearningPolicy)


async def test_the_router_teaches_a_tree_keeping_peer_what_it_routed_and_previews_teach_nothing() -> None:
    from kvgate.common.clock import ManualClock
    from kvgate.gateway.routing.router import Router
    from kvgate.index import IndexSettings, MemoryPrefixIndex
    from tests.index.helpers import LOAD, info

    clock = ManualClock()
    index = MemoryPrefixIndex(IndexSettings(), clock)
    for worker in (A, B, C):
        await index.register(info(worker), LOAD.__class__())
    workers = await index.workers()
    policy = SGLangCacheAware()
    router = Router(index, policy, get_policy("least_loaded"), CHUNK, 2, clock)
    prompt = chain(1, 2, 3, 4)
    await router.preview(prompt, 4 * CHUNK, workers, request_key=1)
    assert policy._tree.matches(prompt) == {}
    first = await router.route(prompt, 4 * CHUNK, workers, request_key=1)
    assert policy._tree.matches(prompt) == {first.decision.worker_id: 4}
    again = await router.route(chain(1, 2, 3, 9), 4 * CHUNK, workers, request_key=2)
    assert again.decision.worker_id == first.decision.worker_id  # 3 of 4 chunks in its tree
