"""The GPU and CPU tiers behind one policy: eviction, offload, swap-in, TTL expiry, copy plans.

Policy (decided here, and why):

- A hash is cached in at most one tier (exclusive tiers): an offload moves it GPU -> CPU, a swap-in
  moves it back, and a block recomputed on the GPU drops its stale CPU copy. So a chunk's tier is
  well defined and no capacity is spent twice on one block.
- **Memory pressure** on the GPU takes a victim among unreferenced cached blocks, an expired one first,
  else the least recently used. An unexpired victim is **offloaded** to the CPU tier (it is still
  wanted: only space ran out); its expiry there is at least ``cpu_ttl_s`` from now. An expired victim,
  or any victim when the CPU tier has no room, is dropped.
- **TTL expiry** (:meth:`TieredCache.expire`) drops unreferenced blocks whose TTL passed, in either
  tier, without offloading: the TTL is the promise of how long a prefix is kept, and it ended.
- CPU pressure (room for an offload) drops the CPU tier's victim (expired first, else LRU).
- Blocks in use are never evicted. A swap-in's CPU source stays reserved until the step's plan is
  handed out, and a block whose KV the current step computes is no hit until then (a sequence in the
  same batch must not read KV that is not written yet).
"""

from __future__ import annotations

from dataclasses import dataclass

from kvgate.common.clock import Clock
from kvgate.proto.ids import Tier
from kvgate.workers.kv.block import BlockKey, KVBlock
from kvgate.workers.kv.block_pool import BlockPool
from kvgate.workers.kv.chunks import ChunkTracker
from kvgate.workers.kv.config import KVCacheConfig
from kvgate.workers.kv.copy_plan import CopyPlan, CopyPlanBuilder
from kvgate.workers.kv.evictions import MIN_CAPACITY, RecentEvictions
from kvgate.workers.kv.publisher import EventPublisher
from kvgate.workers.kv.types import BlockHash


@dataclass(slots=True)
class KVCounters:
    """Monotonic block counts since start, for metrics. Mutated only by :class:`TieredCache`."""

    offloaded: int = 0  # GPU -> CPU copies planned
    swapped_in: int = 0  # CPU -> GPU copies planned
    evicted_ttl: int = 0  # dropped because their TTL had passed (either tier)
    evicted_pressure: int = 0  # dropped, unexpired, to make room (no CPU room, or the CPU tier's LRU)


class TieredCache:
    """Both pools, the step's copy plan and the chunk tracker; every change of what is cached."""

    def __init__(self, config: KVCacheConfig, clock: Clock, publisher: EventPublisher) -> None:
        self.gpu = BlockPool(Tier.GPU, config.num_gpu_blocks)
        self.cpu = BlockPool(Tier.CPU, config.num_cpu_blocks)
        self.counters = KVCounters()
        self.chunks = ChunkTracker(self.locate, publisher, RecentEvictions(_eviction_memory(config)))
        self._clock = clock
        self._cpu_ttl_ms = round(config.cpu_ttl_s * 1000)
        self._plan = CopyPlanBuilder()
        self._pinned: list[KVBlock] = []  # CPU sources of this step's swap-ins
        self._computing: list[KVBlock] = []  # GPU blocks whose KV this step's forward writes

    def locate(self, block_hash: BlockHash) -> KVBlock | None:
        """The block cached under ``block_hash`` in either tier, unverified (pure)."""
        block = self.gpu.get(block_hash)
        return self.cpu.get(block_hash) if block is None else block

    def find(self, key: BlockKey) -> KVBlock | None:
        """The block caching exactly ``key`` in either tier, if it is a usable hit now (pure)."""
        block = self.gpu.find(key)
        if block is None:
            block = self.cpu.find(key)
        return None if block is None or block.computing else block

    def allocate(self) -> KVBlock:
        """A GPU block with ref 1: an empty one, else an evicted victim (offloaded or dropped).

        The caller checks ``gpu.num_free`` first; raises RuntimeError when nothing is free.
        """
        block = self.gpu.allocate()
        if block is not None:
            return block
        victim = self.gpu.pop_victim(self._clock.now_ms())
        if victim is None:
            raise RuntimeError("no free GPU block: check gpu.num_free before allocating")
        self._evict_gpu(victim)
        self.gpu.reuse(victim)
        return victim

    def touch(self, block: KVBlock, ttl_ms: int) -> None:
        """A GPU hit: one more user, TTL refreshed."""
        self.gpu.take(block)
        self._refresh(block, ttl_ms)

    def register(self, block: KVBlock, key: BlockKey, ttl_ms: int, members: tuple[BlockHash, ...]) -> bool:
        """Caches in-use GPU ``block``, whose KV this step computes, under ``key`` (``members``: the
        block hashes of the chunk it ends, when ``key.chunk`` is set). Returns False, changing
        nothing, when the GPU already caches that hash; a CPU copy of it is dropped."""
        if self.gpu.get(key.hash) is not None:
            return False
        stale = self.cpu.get(key.hash)
        if stale is not None:
            self._drop(stale, evicted=False)  # the chunk stays held: it is being computed on the GPU
        self.gpu.register(block, key)
        block.computing = True
        self._computing.append(block)
        if key.chunk is not None:
            self.chunks.add(key.chunk, members)
        self._refresh(block, ttl_ms, force=True)
        return True

    def store(self, block: KVBlock, key: BlockKey, ttl_ms: int, members: tuple[BlockHash, ...]) -> bool:
        """Caches in-use GPU ``block``, whose KV is written already (imported from another worker),
        under ``key``: a hit at once, unlike :meth:`register`, and its chunk (``members``, when
        ``key.chunk`` is set) is published STORED by the next flush. Returns False, changing nothing,
        when either tier caches that hash already."""
        if self.locate(key.hash) is not None:
            return False
        self.gpu.register(block, key)
        if key.chunk is not None:
            self.chunks.add(key.chunk, members)
        self._refresh(block, ttl_ms, force=True)
        return True

    def hold(self, block: KVBlock) -> None:
        """One more user for cached ``block`` of either tier, TTL untouched: no allocation evicts it
        until :meth:`unhold`."""
        (self.gpu if block.tier is Tier.GPU else self.cpu).take(block)

    def unhold(self, block: KVBlock) -> None:
        """Undoes one :meth:`hold` (at ref 0 the block is queued as the most recently used)."""
        (self.gpu if block.tier is Tier.GPU else self.cpu).release(block)

    def take_plan(self) -> CopyPlan:
        """The copies planned since the last step ended (offloads of blocks evicted between two steps),
        to run at once; the plan is empty afterwards."""
        return self._plan.build()

    def release(self, block: KVBlock, ttl_ms: int) -> None:
        """One GPU user fewer; a cached block's TTL is refreshed (its last use is now)."""
        if block.key is not None:
            self._refresh(block, ttl_ms)
        self.gpu.release(block)

    def pin(self, cpu_block: KVBlock) -> None:
        """Reserves a CPU hit so that no offload of the same admission evicts it before its swap-in."""
        self.cpu.take(cpu_block)

    def swap_in(self, cpu_block: KVBlock, ttl_ms: int) -> KVBlock:
        """Moves pinned, cached ``cpu_block`` to a new GPU block (ref 1) and plans the copy."""
        gpu_block = self.allocate()
        key = cpu_block.key
        assert key is not None, "swap_in needs a cached CPU block"
        gpu_block.expires_at_ms = cpu_block.expires_at_ms
        self.cpu.unregister(cpu_block)  # stays reserved (ref 1) until end_step
        self._pinned.append(cpu_block)
        self.gpu.register(gpu_block, key)
        self._refresh(gpu_block, ttl_ms, force=True)
        self._plan.swap_in(cpu_block.block_id, gpu_block.block_id)
        self.counters.swapped_in += 1
        return gpu_block

    def expire(self) -> int:
        """Drops every unreferenced block, in either tier, whose expiry is <= now; returns how many."""
        now, dropped = self._clock.now_ms(), 0
        for pool in (self.gpu, self.cpu):
            while (victim := pool.pop_victim(now, expired_only=True)) is not None:
                self._drop(victim)
                dropped += 1
        self.counters.evicted_ttl += dropped
        return dropped

    def end_step(self) -> CopyPlan:
        """Ends the step: frees swap-in sources, makes computed blocks hits, reports chunk states,
        and hands out the step's copy plan (which the engine runs before any other mutating call)."""
        for cpu_block in self._pinned:
            self.cpu.release(cpu_block)  # unkeyed: becomes empty
        for block in self._computing:
            block.computing = False
        self._pinned, self._computing = [], []
        self.chunks.flush()
        return self._plan.build()

    def _evict_gpu(self, victim: KVBlock) -> None:
        key = victim.key
        assert key is not None
        expired = victim.expires_at_ms <= self._clock.now_ms()
        if expired or not self._offload(victim, key):
            self.chunks.dropping(key.hash)
            self._count_drop(expired)
        self.chunks.touched(key.hash)

    def _offload(self, victim: KVBlock, key: BlockKey) -> bool:
        dst = self._allocate_cpu()
        if dst is None:
            return False
        dst.expires_at_ms = victim.expires_at_ms
        dst.refresh(self._clock.now_ms(), self._cpu_ttl_ms)
        self.cpu.register(dst, key)  # tiers are exclusive, so the CPU does not cache this hash
        self.cpu.release(dst)  # unreferenced: queued as the CPU tier's most recently used
        self._plan.offload(victim.block_id, dst.block_id)
        self.counters.offloaded += 1
        return True

    def _allocate_cpu(self) -> KVBlock | None:
        block = self.cpu.allocate()
        if block is not None:
            return block
        now = self._clock.now_ms()
        victim = self.cpu.pop_victim(now)
        if victim is None:
            return None
        key = victim.key
        assert key is not None
        self.chunks.dropping(key.hash)
        self._count_drop(victim.expires_at_ms <= now)
        self._plan.cancel_offload_to(victim.block_id)
        self.cpu.reuse(victim)
        self.chunks.touched(key.hash)
        return victim

    def _drop(self, block: KVBlock, *, evicted: bool = True) -> None:
        key = block.key
        assert key is not None
        if evicted:
            self.chunks.dropping(key.hash)
        if block.tier is Tier.CPU:
            self._plan.cancel_offload_to(block.block_id)
            self.cpu.discard(block)
        else:
            self.gpu.discard(block)
        self.chunks.touched(key.hash)

    def _refresh(self, block: KVBlock, ttl_ms: int, *, force: bool = False) -> None:
        key = block.key
        if block.refresh(self._clock.now_ms(), ttl_ms) or force:
            assert key is not None
            self.chunks.touched(key.hash)

    def _count_drop(self, expired: bool) -> None:
        if expired:
            self.counters.evicted_ttl += 1
        else:
            self.counters.evicted_pressure += 1


def _eviction_memory(config: KVCacheConfig) -> int:
    # As many chunks as both tiers hold: forgetting a record would take evicting more than the whole
    # cache while one request waits.
    return max(MIN_CAPACITY, (config.num_gpu_blocks + config.num_cpu_blocks) // config.blocks_per_chunk)
