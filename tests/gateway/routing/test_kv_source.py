"""Which holder a moved request's worker is told to fetch the prompt's prefix from."""

from __future__ import annotations

from kvgate.gateway.routing.kv_source import held_chunks, kv_source
from kvgate.gateway.routing.types import KVSource
from kvgate.index.types import LookupResult, PrefixMatch
from kvgate.proto.ids import WorkerId

CHUNK = 128
A, B, C, D = (WorkerId(f"worker-{x}") for x in "abcd")


def lookup(**tiers: str) -> LookupResult:
    matches = {WorkerId(f"worker-{w}"): PrefixMatch(WorkerId(f"worker-{w}"), t) for w, t in tiers.items()}
    return LookupResult(20, matches)


def source(result: LookupResult, chosen: WorkerId, cached: int, prompt: int = 2560, *, min_tokens: int = 256,
           key: int = 0) -> KVSource | None:  # fmt: skip
    return kv_source(result, chosen, cached, prompt, CHUNK, min_tokens, key)


def test_a_request_moved_off_the_longest_holder_names_it() -> None:
    assert source(lookup(a="GGGGGGGGGG", b="GG"), B, 2 * CHUNK) == KVSource(A, 10 * CHUNK)
    assert source(lookup(a="GGGGGGGGGG"), C, 0) == KVSource(A, 10 * CHUNK)


def test_no_source_when_the_chosen_worker_holds_the_most_or_nearly() -> None:
    assert source(lookup(a="GGGGGGGGGG", b="GG"), A, 10 * CHUNK) is None
    assert source(lookup(a="GGGG", b="GGG"), B, 3 * CHUNK) is None  # one chunk more: under 256 tokens
    assert source(lookup(a="GGGGG", b="GGG"), B, 3 * CHUNK) == KVSource(A, 5 * CHUNK)


def test_sources_are_off_at_zero() -> None:
    assert source(lookup(a="GGGGGGGGGG"), C, 0, min_tokens=0) is None


def test_only_chunks_held_now_count_not_pending_ones() -> None:
    assert [held_chunks(t) for t in ("GGCPPP", "PPP", "GC")] == [3, 0, 2]
    assert source(lookup(a="GGPPPPPPPP", b="GGGGG"), C, 0) == KVSource(B, 5 * CHUNK)
    assert source(lookup(a="PPPPPPPPPP"), C, 0) is None


def test_the_gpu_copy_wins_among_equal_holders_and_ties_spread_by_key() -> None:
    assert source(lookup(a="CCCCCC", b="GGGGGG"), C, 0) == KVSource(B, 6 * CHUNK)
    drawn = {source(lookup(a="GGGGGG", b="GGGGGG", d="GGGGGG"), C, 0, key=k) for k in range(6)}
    assert drawn == {KVSource(w, 6 * CHUNK) for w in (A, B, D)}


def test_the_tokens_stop_at_the_prompt() -> None:
    assert source(lookup(a="GGGGGGGGGG"), C, 0, prompt=1200) == KVSource(A, 1200)
