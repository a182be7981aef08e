"""The engine's figures for routing and monitoring: load, monotonic counters and KV waste."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from kvgate.proto.sampling import FinishReason
from kvgate.workers.engine.sequence import Sequence
from kvgate.workers.kv import KVCacheManager


@dataclass(slots=True)
class EngineCounters:
    """Monotonic counts since the engine started; mutated only by the engine (read a ``copy()``).

    Tokens: ``prompt_tokens`` of accepted requests; ``cached_tokens`` (= gpu + cpu) reused at their first
    admission; ``completion_tokens`` generated. ``predicted_cached_tokens`` sums the router's predictions
    of the requests that carried one, ``actual_cached_tokens_of_predicted`` their actual cached tokens,
    ``evicted_predicted_tokens`` the predicted tokens lost to evictions after the request arrived.
    ``preemptions``: running sequences sent back to recompute. Block traffic and evictions are the
    manager's (``LLMEngine.kv_counters``).
    """

    requests: int = 0
    steps: int = 0
    prompt_tokens: int = 0
    cached_tokens: int = 0
    cached_gpu_tokens: int = 0
    cached_cpu_tokens: int = 0
    completion_tokens: int = 0
    predicted_cached_tokens: int = 0
    actual_cached_tokens_of_predicted: int = 0
    evicted_predicted_tokens: int = 0
    preemptions: int = 0
    finished_stop: int = 0
    finished_length: int = 0
    finished_abort: int = 0
    finished_error: int = 0

    def copy(self) -> EngineCounters:
        return EngineCounters(*(getattr(self, name) for name in self.__slots__))

    def count_admitted(self, seq: Sequence) -> None:
        """``seq`` was admitted for the first time: its cache hits are known."""
        cached = seq.cached
        assert cached is not None
        self.cached_tokens += cached.total
        self.cached_gpu_tokens += cached.gpu
        self.cached_cpu_tokens += cached.cpu
        predicted = seq.request.predicted_cached_tokens
        if predicted is not None:
            self.predicted_cached_tokens += predicted
            self.actual_cached_tokens_of_predicted += cached.total
            self.evicted_predicted_tokens += seq.evicted_predicted_tokens

    def count_finished(self, reason: FinishReason) -> None:
        name = f"finished_{reason.value}"
        setattr(self, name, getattr(self, name) + 1)


@dataclass(frozen=True, slots=True)
class KVWaste:
    """GPU slots of in-use blocks (``allocated``) and those of them holding no token's KV (``unused``):
    each running sequence's partially filled last block. 0 allocated reads as 0 waste."""

    allocated_slots: int
    unused_slots: int

    @property
    def fraction(self) -> float:
        return self.unused_slots / self.allocated_slots if self.allocated_slots else 0.0


def kv_waste(kv: KVCacheManager, running: Iterable[Sequence]) -> KVWaste:
    """The waste now (pure). Shared blocks are counted once: only full blocks are shared, so every
    unused slot is in one sequence's own tail block."""
    pool = kv.gpu_pool
    in_use = pool.num_blocks - pool.num_free
    unused = sum(
        len(kv.block_table(s.seq_id)) * kv.config.block_size - kv.num_computed_tokens(s.seq_id)
        for s in running
    )
    return KVWaste(in_use * kv.config.block_size, unused)


def tokens_to_prefill(waiting: Iterable[Sequence], running: Iterable[Sequence], kv: KVCacheManager) -> int:
    """Prefill work queued: the rest of a running sequence still in prefill (more than one token left;
    a decode has one), and each waiting sequence's prompt after its leading chunks that are cached
    here or computed first by a sequence ahead of it (running, or waiting before it), at least its last
    token. So a burst that shares a new prefix counts the prefix once, as the engine will compute it.
    A background prefill (a warm-up) is left out: every other sequence goes before it, so it delays
    none; the chunks it computes still count as computed first."""
    running = list(running)
    left = (seq.num_tokens - kv.num_computed_tokens(seq.seq_id) for seq in running if not seq.background)
    ahead = {h for seq in running for h in seq.prompt.chunk_hashes}
    chunk, cached, queued = kv.config.chunk_size, kv.chunks, 0
    for seq in waiting:
        hashes, size = seq.prompt.chunk_hashes, seq.prompt.token_ids.size
        run = 0
        while run < len(hashes) and (hashes[run] in ahead or hashes[run] in cached):
            run += 1
        queued += size - min(run * chunk, size - 1)
        ahead.update(hashes)
    return queued + sum(n for n in left if n > 1)
