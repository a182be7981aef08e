"""Which holder a moved request's worker is told to fetch the prompt's prefix from."""

from __future__ import annotations

from kvgate.common.clock import ManualClock
from kvgate.gateway.routing import get_policy
from kvgate.gateway.routing.config import RoutingConfig
from kvgate.gateway.routing.kv_source import held_chunks, kv_source
from kvgate.gateway.routing.router import Router
from kvgate.gateway.routing.types import KVSource
from kvgate.index import IndexSettings, MemoryPrefixIndex
from kvgate.index.types import LookupResult, PrefixMatch
from kvgate.proto.events import EventBatch, KVEvent
from kvgate.proto.ids import Epoch, SeqNo, Tier, WorkerId
from kvgate.proto.workers import WorkerLoad
from tests.index.helpers import info

CHUNK = 128
A, B, C, D = (WorkerId(f"worker-{x}") for x in "abcd")


def lookup(**tiers: str) -> LookupResult:
    matches = {WorkerId(f"worker-{w}"): PrefixMatch(WorkerId(f"worker-{w}"), t) for w, t in tiers.items()}
    return LookupResult(20, matches)


ALL = frozenset((A, B, C, D))


def source(result: LookupResult, chosen: WorkerId, cached: int, prompt: int = 2560, *, min_tokens: int = 256,
           key: int = 0, among: frozenset[WorkerId] = ALL) -> KVSource | None:  # fmt: skip
    return kv_source(result, chosen, cached, prompt, CHUNK, min_tokens, key, among)


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


def test_a_holder_outside_the_candidates_is_never_a_source() -> None:
    held = lookup(a="GGGGGGGGGG", b="GGGGGG")
    assert source(held, C, 0, among=frozenset((B, C, D))) == KVSource(B, 6 * CHUNK)
    assert source(held, C, 0, among=frozenset((C, D))) is None


def test_the_tokens_stop_at_the_prompt() -> None:
    assert source(lookup(a="GGGGGGGGGG"), C, 0, prompt=1200) == KVSource(A, 1200)


async def test_the_router_names_a_source_only_while_fetching_beats_computing() -> None:
    async def routed_source(config: RoutingConfig, fleet: tuple[WorkerId, ...] = (A, B)) -> KVSource | None:
        clock = ManualClock()
        index = MemoryPrefixIndex(IndexSettings(), clock)
        busy = WorkerLoad(waiting_prefill_tokens=400_000, running_seqs=8, waiting_seqs=40,
                          gpu_blocks_total=1000, gpu_blocks_free=1000)  # fmt: skip
        idle = WorkerLoad(gpu_blocks_total=1000, gpu_blocks_free=1000)
        await index.register(info(A), busy)
        await index.register(info(B), idle)
        hashes = [bytes([i]) * 16 for i in range(1, 41)]
        stored = tuple(KVEvent.stored(h, Tier.GPU, clock.now_ms() + 600_000) for h in hashes)
        assert (await index.apply(EventBatch(A, Epoch(1), SeqNo(1), stored))).ok
        router = Router(index, get_policy("kvgate", config), get_policy("least_loaded"), CHUNK, 2, clock)
        workers = [w for w in await index.workers() if w.info.worker_id in fleet]
        routed = await router.route(hashes, 40 * CHUNK + 10, workers, request_key=1)
        assert routed.decision.worker_id == B  # the holder is far too busy: the request moves
        return routed.source

    assert await routed_source(RoutingConfig()) == KVSource(A, 40 * CHUNK)
    assert await routed_source(RoutingConfig(), fleet=(B,)) is None  # the holder is not a candidate
    assert await routed_source(RoutingConfig(kv_fetch_tokens_per_s=10_000)) is None  # no faster
    assert await routed_source(RoutingConfig(kv_fetch_min_tokens=0)) is None
