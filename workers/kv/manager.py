"""The worker's KV block manager: what the scheduler calls (in the spirit of vLLM v1's KVCacheManager).

One engine step, in order::

    expire()                                              # drop unused blocks whose TTL passed
    admit(seq, prompt, budget) / allocate_slots(seq, n)   # None: not enough GPU blocks, nothing changed
    free(victim)                                          # preemption: a sequence not scheduled yet
    plan = end_step()                                     # the step's copies; chunk changes published
    # engine: copy_blocks(plan.offload), copy_blocks(plan.swap_in), then the forward
    append_tokens(seq, sampled); free(finished)           # after the forward
    batch = publisher.drain()                             # what changed, for the index

Contracts the engine keeps: it runs ``plan.offload``, then ``plan.swap_in``, then the forward, before
calling any other mutating method; the forward computes the KV of every token that got slots in the
step; a sequence that got slots in the step is freed only after ``end_step`` (preemption picks
sequences not scheduled yet in the step, as vLLM's scheduler does). Changes made after ``end_step``
(frees after the forward) are published by the next ``end_step``, or by :meth:`flush_events` when idle.
"""

from __future__ import annotations

from kvgate.common.clock import Clock
from kvgate.proto.hashing import TokenIds
from kvgate.proto.ids import Tier
from kvgate.proto.layout import reusable_tokens
from kvgate.proto.units import TokenCount
from kvgate.workers.kv.block import KVBlock
from kvgate.workers.kv.block_pool import BlockPool
from kvgate.workers.kv.chunks import ChunkTracker
from kvgate.workers.kv.config import KVCacheConfig
from kvgate.workers.kv.copy_plan import CopyPlan
from kvgate.workers.kv.imports import WriteBlocks, import_prefix
from kvgate.workers.kv.prompt import Prompt
from kvgate.workers.kv.publisher import EventPublisher
from kvgate.workers.kv.results import Admission, CachedTokens, ImportedPrefix, PrefixHit
from kvgate.workers.kv.sequence import SeqState
from kvgate.workers.kv.tiers import KVCounters, TieredCache
from kvgate.workers.kv.types import BlockId, BlockPair, Pin, SeqId


class KVCacheManager:
    """Block tables of the running sequences over a GPU and a CPU pool, with prefix caching.

    Full blocks are cached under their chained hash and shared (ref counts); a hit is reused only
    after its parent hash and token ids are verified. Freed cached blocks stay until evicted: by TTL
    (:meth:`expire`) or by memory pressure (offloaded to the CPU tier, see :mod:`.tiers`). Every change
    of a held chunk reaches ``publisher`` by the end of the step.
    """

    def __init__(self, config: KVCacheConfig, clock: Clock, publisher: EventPublisher) -> None:
        self.config = config
        self._cache = TieredCache(config, clock, publisher)
        self._seqs: dict[SeqId, SeqState] = {}
        self._scheduled: list[SeqState] = []

    @property
    def gpu_pool(self) -> BlockPool:
        """Read-only view for metrics and tests; mutate only through the manager."""
        return self._cache.gpu

    @property
    def cpu_pool(self) -> BlockPool:
        """Read-only view for metrics and tests; mutate only through the manager."""
        return self._cache.cpu

    @property
    def chunks(self) -> ChunkTracker:
        """Read-only view for metrics and tests; mutate only through the manager."""
        return self._cache.chunks

    @property
    def counters(self) -> KVCounters:
        return self._cache.counters

    @property
    def eviction_mark(self) -> int:
        """The latest chunk eviction's number (see :mod:`.evictions`); a request remembers it on arrival."""
        return self._cache.chunks.evictions.mark

    def __contains__(self, seq_id: SeqId) -> bool:
        return seq_id in self._seqs

    def seq_ids(self) -> list[SeqId]:
        return list(self._seqs)

    def block_table(self, seq_id: SeqId) -> tuple[BlockId, ...]:
        """``seq_id``'s GPU blocks in order (KeyError when unknown)."""
        return tuple(b.block_id for b in self._seqs[seq_id].blocks)

    def num_computed_tokens(self, seq_id: SeqId) -> int:
        """Tokens of ``seq_id`` that have slots (cached prefix included)."""
        return self._seqs[seq_id].num_computed

    def cached_tokens(self, seq_id: SeqId) -> CachedTokens:
        """Prompt tokens of ``seq_id`` served from the GPU and the CPU tier at admission."""
        seq = self._seqs[seq_id]
        return CachedTokens(seq.gpu_cached_tokens, seq.cpu_cached_tokens)

    def lookup(self, prompt: Prompt) -> PrefixHit:
        """The longest verified cached prefix of ``prompt`` right now (pure; admit looks again)."""
        prompt.check(self.config.block_size, self.config.chunk_size)
        return PrefixHit(tuple((b.tier, b.block_id) for b in self._match(prompt)), self.config.block_size)

    def import_prefix(self, prompt: Prompt, num_blocks: int, write: WriteBlocks) -> ImportedPrefix:
        """Caches the KV of ``prompt``'s first ``num_blocks`` full blocks, computed by another worker,
        after the prefix cached here already: only reusable blocks (never the last token's), only as
        many as the GPU has free (evicting as an allocation does), each under the key computed here.
        ``write`` puts their KV into the GPU blocks (see :mod:`.imports`); its exception propagates
        and nothing is imported. The blocks end unreferenced and cached (default TTL), their chunks
        published. Call between steps only. Raises ValueError for an inconsistent prompt."""
        prompt.check(self.config.block_size, self.config.chunk_size)
        return import_prefix(self._cache, self.config, prompt, self._match(prompt), num_blocks, write)

    def lost_to_eviction(
        self, prompt: Prompt, cached_tokens: TokenCount, predicted_tokens: TokenCount, mark: int
    ) -> TokenCount:
        """Predicted cached tokens of ``prompt`` that were not reused (``cached_tokens`` were) because the
        first missing chunk was evicted after ``mark`` (an :attr:`eviction_mark` taken on arrival): the
        whole shortfall, up to the most that can be reused, or 0 (pure)."""
        expected = min(predicted_tokens, reusable_tokens(len(prompt), self.config.block_size))
        first_missing = cached_tokens // self.config.chunk_size
        if cached_tokens >= expected or first_missing >= len(prompt.chunk_hashes):
            return TokenCount(0)
        evicted = self._cache.chunks.evictions.evicted_since(prompt.chunk_hashes[first_missing], mark)
        return TokenCount(expected - cached_tokens if evicted else 0)

    def admit(
        self, seq_id: SeqId, prompt: Prompt, token_budget: TokenCount, pin: Pin | None = None,
        *, reuse: bool = True,
    ) -> Admission | None:  # fmt: skip
        """Takes on new sequence ``seq_id``: reuses the cached prefix of ``prompt`` (GPU hits shared,
        CPU hits swapped in) and allocates slots for the next ``min(uncached, token_budget)`` tokens.

        Returns None, changing nothing, when the GPU lacks the blocks. At least the prompt's last token
        is always computed (the engine needs its logits), so a fully cached prompt recomputes its last
        block. ``pin`` gives the leading tokens a longer TTL. ``reuse=False`` takes no cached block (the
        whole prompt is computed, and cached as usual). Raises ValueError for a known ``seq_id``,
        an inconsistent prompt or ``token_budget < 1``.
        """
        self._check_admit(seq_id, prompt, token_budget)
        hit = self._match(prompt) if reuse else []
        num_cached = len(hit) * self.config.block_size
        total = num_cached + min(len(prompt) - num_cached, token_budget)
        if not self._fits(hit, total):
            return None
        seq = SeqState.from_prompt(seq_id, prompt, pin)
        swap_in = self._take_hit(seq, hit)
        self._grow(seq, total)
        self._seqs[seq_id] = seq
        cached = CachedTokens(seq.gpu_cached_tokens, seq.cpu_cached_tokens)
        return Admission(self.block_table(seq_id), cached, total - num_cached, swap_in)

    def allocate_slots(self, seq_id: SeqId, num_new_tokens: int) -> tuple[BlockId, ...] | None:
        """Slots for ``seq_id``'s next ``num_new_tokens`` known tokens (computed in this step).

        Returns the blocks appended to its table (often none: the last block has room), or None,
        changing nothing, when the GPU lacks the blocks: never a partial allocation. Blocks filled by
        these tokens are cached. Raises ValueError when the tokens are not known (append them first).
        """
        seq = self._seqs[seq_id]
        total = seq.num_computed + num_new_tokens
        if num_new_tokens < 0 or total > seq.num_tokens:
            raise ValueError(f"{seq_id}: {num_new_tokens} new tokens, but {seq.num_tokens} are known")
        if self.config.blocks_for(total) - len(seq.blocks) > self._cache.gpu.num_free:
            return None
        return tuple(b.block_id for b in self._grow(seq, total))

    def append_tokens(self, seq_id: SeqId, token_ids: TokenIds) -> None:
        """Records tokens sampled for ``seq_id``; slots for them come from :meth:`allocate_slots`."""
        self._seqs[seq_id].append(token_ids)

    def free(self, seq_id: SeqId) -> bool:
        """Drops ``seq_id``: its blocks lose a user, tail first, so a chain's tail is evicted first;
        cached ones stay (TTL refreshed: this is their last use). Idempotent: False when unknown.
        Raises RuntimeError when ``seq_id`` got slots in this step (free it after :meth:`end_step`)."""
        seq = self._seqs.get(seq_id)
        if seq is None:
            return False
        if seq.scheduled:
            raise RuntimeError(f"{seq_id} got slots in this step: free it after end_step()")
        del self._seqs[seq_id]
        for index in reversed(range(len(seq.blocks))):
            self._cache.release(seq.blocks[index], self._ttl_ms(seq, index))
        return True

    def abort(self, seq_id: SeqId) -> bool:
        """Same as :meth:`free` (an aborted sequence's full blocks stay cached)."""
        return self.free(seq_id)

    def expire(self) -> int:
        """Drops unreferenced blocks whose TTL has passed, in both tiers; returns how many. Idempotent."""
        return self._cache.expire()

    def end_step(self) -> CopyPlan:
        """Closes the step: returns its copy plan and reports changed chunks to the publisher."""
        for seq in self._scheduled:
            seq.scheduled = False
        self._scheduled.clear()
        return self._cache.end_step()

    def flush_events(self) -> None:
        """Reports chunks changed since the last step (e.g. by frees after the forward) to the
        publisher now, without ending a step; for an idle engine. Idempotent."""
        self._cache.chunks.flush()

    def _check_admit(self, seq_id: SeqId, prompt: Prompt, token_budget: TokenCount) -> None:
        if seq_id in self._seqs:
            raise ValueError(f"sequence {seq_id} is already admitted")
        if token_budget < 1:
            raise ValueError("token_budget must be >= 1")
        prompt.check(self.config.block_size, self.config.chunk_size)

    def _match(self, prompt: Prompt) -> list[KVBlock]:
        # Walks the chain while blocks verify, over the reusable blocks only (the layout's rule).
        size = self.config.block_size
        hit: list[KVBlock] = []
        for index in range(reusable_tokens(len(prompt), size) // size):
            block = self._cache.find(prompt.block_key(index, size))
            if block is None:
                break
            hit.append(block)
        return hit

    def _fits(self, hit: list[KVBlock], total: int) -> bool:
        on_gpu = [b for b in hit if b.tier is Tier.GPU]
        needed = self.config.blocks_for(total) - len(on_gpu)
        reclaimed = sum(b.ref_cnt == 0 for b in on_gpu)  # free now, but this admission takes them
        return needed <= self._cache.gpu.num_free - reclaimed

    def _take_hit(self, seq: SeqState, hit: list[KVBlock]) -> tuple[BlockPair, ...]:
        # Hold every hit before allocating anything, so no eviction of this admission takes one.
        for index, block in enumerate(hit):
            if block.tier is Tier.GPU:
                self._cache.touch(block, self._ttl_ms(seq, index))
            else:
                self._cache.pin(block)
        swap_in: list[BlockPair] = []
        for index, block in enumerate(hit):
            if block.tier is Tier.CPU:
                moved = self._cache.swap_in(block, self._ttl_ms(seq, index))
                swap_in.append((block.block_id, moved.block_id))
                seq.blocks.append(moved)
            else:
                seq.blocks.append(block)
        seq.cpu_cached_tokens = len(swap_in) * self.config.block_size
        seq.gpu_cached_tokens = (len(hit) - len(swap_in)) * self.config.block_size
        seq.num_computed = len(hit) * self.config.block_size
        return tuple(swap_in)

    def _grow(self, seq: SeqState, total: int) -> list[KVBlock]:
        # Extends seq's table to `total` tokens and caches the blocks those tokens fill.
        new = [self._cache.allocate() for _ in range(self.config.blocks_for(total) - len(seq.blocks))]
        seq.blocks.extend(new)
        done, seq.num_computed = seq.num_computed, total
        for index in range(done // self.config.block_size, total // self.config.block_size):
            self._register(seq, index)
        if total > done and not seq.scheduled:
            seq.scheduled = True
            self._scheduled.append(seq)
        return new

    def _register(self, seq: SeqState, index: int) -> None:
        cfg = self.config
        key = seq.key(index, cfg.block_size, cfg.chunk_size)
        members = seq.chunk_members(index, cfg.blocks_per_chunk) if key.chunk is not None else ()
        self._cache.register(seq.blocks[index], key, self._ttl_ms(seq, index), members)

    def _ttl_ms(self, seq: SeqState, index: int) -> int:
        ttl_s = self.config.ttl_s
        if seq.pin is not None and index * self.config.block_size < seq.pin.tokens:
            ttl_s = max(ttl_s, seq.pin.ttl_s)
        return round(ttl_s * 1000)
