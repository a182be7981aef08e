"""Importing a prefix's KV computed by another worker (``KVCacheManager.import_prefix``), narrated with
exact block ids: the blocks become ordinary GPU hits, only after what is cached here already, only as
many as the GPU has free, never leaked, and their chunks are published STORED like computed ones.

Blocks hold 4 tokens, chunks 2 blocks (``tests.workers.kv.helpers``).
"""

from __future__ import annotations

import pytest

from kvgate.proto.events import KVEvent
from kvgate.proto.ids import Tier
from kvgate.workers.kv import Admission, CachedTokens, CopyPlan, ImportedPrefix
from tests.workers.kv.helpers import (
    IndexView,
    S,
    check_integrity,
    holdings_from_pools,
    ids,
    prompt,
    rig,
)

GPU, CPU = Tier.GPU, Tier.CPU
TTL_MS = 300_000


class Writes:
    """Records every write the manager asks for (what the engine would copy into the pools)."""

    def __init__(self) -> None:
        self.calls: list[tuple[int, tuple[int, ...], CopyPlan]] = []

    def __call__(self, first: int, block_ids: tuple[int, ...], plan: CopyPlan) -> None:
        self.calls.append((first, block_ids, plan))


def test_imported_blocks_become_gpu_hits() -> None:
    r = rig(gpu=10)
    p = prompt(ids(0, 18))  # 4 reusable full blocks (16 tokens); the last token's block is computed
    write = Writes()
    assert r.kv.import_prefix(p, 4, write) == ImportedPrefix(cached_blocks=0, imported_blocks=4)
    assert write.calls == [(0, (0, 1, 2, 3), CopyPlan())]
    # Unreferenced and cached, released tail first (the chain's tail is evicted first).
    assert r.gpu() == (ids(4, 6), [3, 2, 1, 0])
    assert [b.hash for b in r.kv.gpu_pool.blocks[:4]] == list(p.block_hashes)
    assert r.kv.lookup(p).blocks == ((GPU, 0), (GPU, 1), (GPU, 2), (GPU, 3))
    # An admission reuses them as GPU hits and computes only the last 2 tokens, in block 4.
    assert r.kv.admit(S("a"), p, 100) == Admission((0, 1, 2, 3, 4), CachedTokens(gpu=16), 2, ())
    check_integrity(r.kv)


def test_never_the_last_tokens_block_nor_more_than_offered() -> None:
    r = rig(gpu=10)
    write = Writes()
    # 16 tokens: the 4th block holds the last token, so 3 at most, though 4 are offered.
    assert r.kv.import_prefix(prompt(ids(0, 16)), 4, write) == ImportedPrefix(0, 3)
    # Only 1 offered: 1 imported.
    assert r.kv.import_prefix(prompt(ids(100, 16)), 1, write) == ImportedPrefix(0, 1)
    assert [(first, blocks) for first, blocks, _ in write.calls] == [(0, (0, 1, 2)), (0, (3,))]
    check_integrity(r.kv)


def test_only_the_blocks_after_the_local_prefix_are_imported() -> None:
    r = rig(gpu=10)
    r.kv.admit(S("a"), prompt(ids(0, 10)), 100)  # blocks 0, 1 full and cached; 2 partial
    r.kv.end_step()
    r.kv.free(S("a"))
    assert r.gpu() == ([*ids(3, 7), 2], [1, 0])
    write = Writes()
    p = prompt(ids(0, 18))
    # Blocks 0 and 1 are cached here: only prompt blocks 2 and 3 come in, into GPU blocks 3 and 4.
    assert r.kv.import_prefix(p, 4, write) == ImportedPrefix(cached_blocks=2, imported_blocks=2)
    assert write.calls == [(2, (3, 4), CopyPlan())]
    assert r.kv.lookup(p).blocks == ((GPU, 0), (GPU, 1), (GPU, 3), (GPU, 4))
    # Nothing is offered past what is cached: no write at all.
    assert r.kv.import_prefix(p, 4, write) == ImportedPrefix(4, 0)
    assert r.kv.import_prefix(prompt(ids(0, 18)), 1, write) == ImportedPrefix(4, 0)
    assert len(write.calls) == 1
    check_integrity(r.kv)


def test_short_of_free_blocks_fewer_or_none_are_imported() -> None:
    r = rig(gpu=5)
    r.kv.admit(S("a"), prompt(ids(100, 10)), 100)  # holds blocks 0, 1, 2: 2 left free
    write = Writes()
    p = prompt(ids(0, 18))
    assert r.kv.import_prefix(p, 4, write) == ImportedPrefix(0, 2)
    assert write.calls == [(0, (3, 4), CopyPlan())]
    assert r.kv.lookup(p).blocks == ((GPU, 3), (GPU, 4))
    r.kv.end_step()
    # Another sequence takes the last 2 blocks (the imported ones, evicted tail first): the GPU is full.
    assert r.kv.admit(S("b"), prompt(ids(300, 8)), 100).block_table == (4, 3)
    assert r.kv.import_prefix(prompt(ids(500, 18)), 4, write) == ImportedPrefix(0, 0)
    assert len(write.calls) == 1  # nothing free: no write
    check_integrity(r.kv)


def test_the_local_prefix_is_held_while_allocating() -> None:
    r = rig(gpu=3)
    r.kv.admit(S("a"), prompt(ids(0, 9)), 100)  # blocks 0, 1 full and cached; 2 partial
    r.kv.end_step()
    r.kv.free(S("a"))
    write = Writes()
    p = prompt(ids(0, 18))
    # Blocks 0 and 1 are free cached, yet they are the prefix: only block 2 may be taken.
    assert r.kv.import_prefix(p, 4, write) == ImportedPrefix(2, 1)
    assert write.calls == [(2, (2,), CopyPlan())]
    assert r.kv.lookup(p).blocks == ((GPU, 0), (GPU, 1), (GPU, 2))
    check_integrity(r.kv)


def test_evicted_blocks_are_offloaded_before_the_write() -> None:
    r = rig(gpu=3, cpu=4)
    r.kv.admit(S("a"), prompt(ids(100, 9)), 100)  # blocks 0, 1 full and cached; 2 partial
    r.kv.end_step()
    r.kv.free(S("a"))
    write = Writes()
    # Block 2 is empty, 1 and 0 free cached: the import takes 2, then evicts 1 and 0 (LRU first) to
    # CPU 0 and 1, and the write runs that plan before it overwrites them.
    assert r.kv.import_prefix(prompt(ids(0, 18)), 4, write) == ImportedPrefix(0, 3)
    assert write.calls == [(0, (2, 1, 0), CopyPlan(offload=((1, 0), (0, 1))))]
    assert r.kv.end_step() == CopyPlan()  # handed out already
    assert r.kv.lookup(prompt(ids(100, 9))).blocks == ((CPU, 1), (CPU, 0))
    check_integrity(r.kv)


def test_a_failed_write_leaks_nothing_and_caches_nothing() -> None:
    r = rig(gpu=10)
    r.kv.admit(S("a"), prompt(ids(0, 10)), 100)
    r.kv.end_step()
    r.kv.free(S("a"))
    assert r.gpu() == ([*ids(3, 7), 2], [1, 0])
    cached = r.kv.gpu_pool.cached_items()

    def fail(first: int, block_ids: tuple[int, ...], plan: CopyPlan) -> None:
        raise RuntimeError("the KV did not fit")

    with pytest.raises(RuntimeError, match="did not fit"):
        r.kv.import_prefix(prompt(ids(0, 18)), 4, fail)
    # Blocks 3 and 4 were taken for prompt blocks 2 and 3, and went back to the empty queue uncached.
    assert r.gpu() == ([*ids(5, 5), 2, 3, 4], [1, 0])
    assert r.kv.gpu_pool.cached_items() == cached
    pool = r.kv.gpu_pool
    assert pool.num_empty + len(pool.free_cached_ids()) + sum(b.ref_cnt > 0 for b in pool.blocks) == 10
    check_integrity(r.kv)


def test_imported_chunks_are_published_stored() -> None:
    r = rig(gpu=10)
    view = IndexView(r.publisher)
    view.drain()  # the epoch's CLEARED
    p = prompt(ids(0, 18))
    r.kv.import_prefix(p, 4, Writes())
    c0, c1 = p.chunk_hashes
    t0 = r.now_ms
    assert r.publisher.drain().events == (
        KVEvent.stored(c0, GPU, t0 + TTL_MS),
        KVEvent.stored(c1, GPU, t0 + TTL_MS),
    )
    assert set(r.kv.chunks.holding(c) for c in p.chunk_hashes) == set(holdings_from_pools(r.kv).values())
    assert len(r.kv.chunks) == 2
