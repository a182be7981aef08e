"""What a gateway learns from its own decisions: runs along a chain per worker, for the KV TTL, within
the worker's capacity and a total bound, never shorter than what the index says, forgotten on failure."""

from __future__ import annotations

import pytest

from kvgate.gateway.routing.learned import LearnedHoldings
from kvgate.index.types import LookupResult, PrefixMatch
from kvgate.proto.ids import ChunkHash, WorkerId

A, B, C = WorkerId("a"), WorkerId("b"), WorkerId("c")


def chain(tag: str, n: int) -> list[ChunkHash]:
    return [ChunkHash(f"{tag}{i:015d}".encode()[:16]) for i in range(n)]


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def runs(learned: LearnedHoldings, hashes: list[ChunkHash], workers=(A, B, C)) -> dict[str, str]:
    result = learned.merge(LookupResult(len(hashes), {}), hashes, workers)
    return {w: m.tiers for w, m in result.matches.items()}


def test_a_worker_holds_the_longest_prefix_routed_to_it() -> None:
    learned = LearnedHoldings(ttl_s=300)
    prefix = chain("p", 6)
    learned.record(prefix[:4], A)
    learned.record(prefix, B)
    assert runs(learned, [*prefix, *chain("x", 2)]) == {A: "GGGG", B: "GGGGGG"}
    assert runs(learned, chain("q", 3)) == {}


def test_only_the_workers_asked_about_and_never_shorter_than_the_index() -> None:
    learned = LearnedHoldings(ttl_s=300)
    prefix = chain("p", 4)
    learned.record(prefix, A)
    learned.record(prefix, B)
    assert runs(learned, prefix, workers=(B,)) == {B: "GGGG"}
    indexed = LookupResult(4, {A: PrefixMatch(A, "GGGC"), B: PrefixMatch(B, "GG")})
    merged = learned.merge(indexed, prefix[:3], (A, B)).matches
    assert (merged[A].tiers, merged[B].tiers) == ("GGGC", "GGG")


def test_entries_expire_ttl_after_their_last_use() -> None:
    clock = Clock()
    learned = LearnedHoldings(ttl_s=10, monotonic=clock)
    prefix = chain("p", 4)
    learned.record(prefix, A)
    clock.now = 8
    learned.record(prefix[:2], A)  # used again: the first two chunks live on
    clock.now = 12
    assert runs(learned, prefix) == {A: "GG"}
    clock.now = 18.5
    assert runs(learned, prefix) == {}


def test_a_worker_keeps_at_most_its_capacity_least_recently_routed_dropped_first() -> None:
    learned = LearnedHoldings(ttl_s=300)
    old, new = chain("o", 4), chain("n", 4)
    learned.record(old, A, capacity_chunks=6)
    learned.record(new, A, capacity_chunks=6)
    assert runs(learned, old) == {}  # its first two chunks went: the chain is broken at the root
    assert runs(learned, new) == {A: "GGGG"}
    assert len(learned) == 6


def test_the_total_bound_drops_the_least_recently_used_worker_first() -> None:
    learned = LearnedHoldings(ttl_s=300, max_entries=8)
    learned.record(chain("a", 4), A)
    learned.record(chain("b", 4), B)
    learned.record(chain("c", 2), C)
    assert len(learned) <= 8
    assert runs(learned, chain("a", 4)) == {}
    assert runs(learned, chain("c", 2)) == {C: "GG"}


def test_a_prompt_shorter_than_a_chunk_records_nothing() -> None:
    learned = LearnedHoldings(ttl_s=300, max_entries=4)
    learned.record([], A)  # a worker holding nothing must not be the first to drop from
    learned.record(chain("b", 3), B)
    learned.record(chain("c", 3), C)
    assert len(learned) == 4
    assert runs(learned, chain("c", 3)) == {C: "GGG"}


def test_forget_drops_a_worker() -> None:
    learned = LearnedHoldings(ttl_s=300)
    prefix = chain("p", 3)
    learned.record(prefix, A)
    learned.record(prefix, B)
    learned.forget(A)
    learned.forget(WorkerId("never-seen"))
    assert runs(learned, prefix) == {B: "GGG"}
    assert len(learned) == 3


def test_bad_bounds_are_refused() -> None:
    with pytest.raises(ValueError, match="ttl_s"):
        LearnedHoldings(ttl_s=0)
