"""Builders and checkers for the block-manager tests: small blocks (4 tokens, chunks of 2 blocks) so
that scenarios read block by block, a manual clock, and an index-like fold of the published events."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from kvgate.common.clock import ManualClock
from kvgate.proto.events import EventBatch, EventKind, Holding
from kvgate.proto.hashing import HashRoot
from kvgate.proto.ids import ChunkHash, Epoch, Tier, WorkerId
from kvgate.workers.kv import (
    BlockPool,
    CopyPlan,
    KVCacheConfig,
    KVCacheManager,
    Prompt,
    SeqId,
    StepEventPublisher,
)

BS, CS = 4, 8  # tokens per block, tokens per chunk: 2 blocks per chunk
ROOT = HashRoot(b"test-secret", "test-model", cache_salt="tenant-1")
WORKER = WorkerId("worker-0")
S = SeqId  # S("a") reads as "sequence a"


@dataclass
class Rig:
    """A manager with its clock and publisher."""

    kv: KVCacheManager
    clock: ManualClock
    publisher: StepEventPublisher

    @property
    def now_ms(self) -> int:
        return self.clock.now_ms()

    def gpu(self) -> tuple[list[int], list[int]]:
        """(empty ids, free cached ids in eviction order) of the GPU pool."""
        return self.kv.gpu_pool.empty_ids(), self.kv.gpu_pool.free_cached_ids()

    def cpu(self) -> tuple[list[int], list[int]]:
        return self.kv.cpu_pool.empty_ids(), self.kv.cpu_pool.free_cached_ids()

    def refs(self, *block_ids: int) -> list[int]:
        return [self.kv.gpu_pool.blocks[i].ref_cnt for i in block_ids]


def rig(
    gpu: int, cpu: int = 0, *, ttl_s: float = 300, cpu_ttl_s: float = 300, bs: int = BS, cs: int = CS
) -> Rig:
    clock = ManualClock()
    publisher = StepEventPublisher(WORKER, Epoch(1))
    config = KVCacheConfig(gpu, cpu, block_size=bs, chunk_size=cs, ttl_s=ttl_s, cpu_ttl_s=cpu_ttl_s)
    return Rig(KVCacheManager(config, clock, publisher), clock, publisher)


def prompt(token_ids: list[int], *, bs: int = BS, cs: int = CS, root: HashRoot = ROOT) -> Prompt:
    return Prompt.build(token_ids, root, block_size=bs, chunk_size=cs)


def ids(start: int, count: int) -> list[int]:
    """``count`` consecutive token ids from ``start`` (distinct ranges never share a block)."""
    return list(range(start, start + count))


class IndexView:
    """What an index learns from the drained batches: seq numbers must be consecutive from 1."""

    def __init__(self, publisher: StepEventPublisher) -> None:
        self.publisher = publisher
        self.held: dict[ChunkHash, Holding] = {}
        self.seq = 0

    def drain(self) -> EventBatch | None:
        batch = self.publisher.drain()
        if batch is not None:
            assert batch.seq == self.seq + 1, f"gap: got batch {batch.seq} after {self.seq}"
            self.seq = batch.seq
            for event in batch.events:
                self._apply(event.kind, event.chunk, Holding(event.chunk, event.tier, event.expires_at_ms))
        return batch

    def resync(self) -> None:
        snapshot = self.publisher.snapshot()
        self.held = {h.chunk: h for h in snapshot.holdings}
        self.seq = snapshot.seq

    def _apply(self, kind: EventKind, chunk: ChunkHash | None, holding: Holding) -> None:
        if kind is EventKind.CLEARED:
            self.held.clear()
        elif kind is EventKind.EVICTED:
            self.held.pop(chunk, None)
        else:
            self.held[chunk] = holding


def holdings_from_pools(kv: KVCacheManager) -> dict[ChunkHash, Holding]:
    """Chunk states recomputed from the pools alone: from each cached chunk-ending block, walk the
    parent hashes back through both tiers (independent of the manager's chunk tracker)."""
    by_hash = {h: b for pool in (kv.gpu_pool, kv.cpu_pool) for h, b in pool.cached_items()}
    per_chunk = kv.config.blocks_per_chunk
    out: dict[ChunkHash, Holding] = {}
    for block in by_hash.values():
        if block.key.chunk is None:
            continue
        chain = [block]
        while len(chain) < per_chunk and (parent := by_hash.get(chain[-1].key.parent)) is not None:
            chain.append(parent)
        if len(chain) == per_chunk:
            tier = Tier.GPU if all(b.tier is Tier.GPU for b in chain) else Tier.CPU
            out[block.key.chunk] = Holding(block.key.chunk, tier, min(b.expires_at_ms for b in chain))
    return out


def check_integrity(kv: KVCacheManager) -> None:
    """Pool invariants: no leak, no double free, ref counts = users, hash maps and queues consistent,
    tiers exclusive."""
    users = Counter(i for seq_id in kv.seq_ids() for i in kv.block_table(seq_id))
    for seq_id in kv.seq_ids():
        table = kv.block_table(seq_id)
        assert len(set(table)) == len(table), f"{seq_id} holds a block twice"
    _check_pool(kv.gpu_pool, users)
    _check_pool(kv.cpu_pool, None)
    gpu_hashes = {h for h, _ in kv.gpu_pool.cached_items()}
    assert not gpu_hashes & {h for h, _ in kv.cpu_pool.cached_items()}, "a hash is cached in both tiers"


def _check_pool(pool: BlockPool, users: Counter | None) -> None:
    empty, free = pool.empty_ids(), pool.free_cached_ids()
    in_use = [b.block_id for b in pool.blocks if b.ref_cnt > 0]
    assert len(set(empty)) == len(empty), "a block is queued twice"
    assert len(set(free)) == len(free), "a block is queued twice"
    assert not set(empty) & set(free), "a block is both empty and cached-free"
    assert len(empty) + len(free) + len(in_use) == pool.num_blocks, "leak: free + used != capacity"
    cached = dict(pool.cached_items())
    assert {id(b) for b in cached.values()} == {id(b) for b in pool.blocks if b.key is not None}
    for block_hash, block in cached.items():
        assert block.key.hash == block_hash
    for block in pool.blocks:
        if users is not None:
            assert block.ref_cnt == users[block.block_id], f"block {block.block_id}: ref != users"
        else:  # a CPU block is only ever referenced as a swap-in source of the current step: unkeyed
            assert block.ref_cnt in (0, 1)
            assert block.ref_cnt == 0 or block.key is None
        if block.ref_cnt == 0:
            assert (block.block_id in free) == (block.key is not None)
            assert (block.block_id in empty) == (block.key is None)


class PoolModel:
    """Plays the engine on a model of the KV pools (block id -> hash of the content there): each step
    runs the plan's offloads, then its swap-ins, then the forward, which writes the blocks cached
    during the step. Checks the plan's shape and that every cached block then holds its own content."""

    def __init__(self, kv: KVCacheManager) -> None:
        self.kv = kv
        self.gpu: dict[int, bytes | None] = {}
        self.cpu: dict[int, bytes | None] = {}

    def step(self) -> CopyPlan:
        computed = [b for b in self.kv.gpu_pool.blocks if b.computing]
        plan = self.kv.end_step()
        for pairs in (plan.offload, plan.swap_in):
            assert len({dst for _, dst in pairs}) == len(pairs), "a destination repeats"
            assert len({src for src, _ in pairs}) == len(pairs), "a source repeats"
        for src, dst in plan.offload:
            self.cpu[dst] = self.gpu.get(src)
        for src, dst in plan.swap_in:
            self.gpu[dst] = self.cpu.get(src)
        for block in computed:
            self.gpu[block.block_id] = block.hash
        self.check()
        return plan

    def check(self) -> None:
        for pool, content in ((self.kv.gpu_pool, self.gpu), (self.kv.cpu_pool, self.cpu)):
            for block_hash, block in pool.cached_items():
                stale = f"{pool.tier.name} block {block.block_id} does not hold its content"
                assert content.get(block.block_id) == block_hash, stale


def pool_state(kv: KVCacheManager) -> tuple:
    """Everything an allocation could change in both pools; equal before and after means untouched."""
    return tuple(
        (pool.empty_ids(), pool.free_cached_ids(), [(b.ref_cnt, b.key, b.expires_at_ms) for b in pool.blocks])
        for pool in (kv.gpu_pool, kv.cpu_pool)
    )
