"""``EngineStats``: the engine's figures as of its last step, readable from any thread."""

from __future__ import annotations

from dataclasses import dataclass, field

from kvgate.proto.workers import WorkerLoad
from kvgate.workers.engine import EngineCounters, LLMEngine
from kvgate.workers.kv import KVCounters


@dataclass(frozen=True, slots=True)
class EngineStats:
    """One immutable reading, taken on the engine thread after a step and published by reference (a
    reader never sees a half-updated record). ``gpu_cached_blocks``: full GPU blocks in the prefix
    cache, in use or not; ``last_event_seq``: seq of the last event batch (0: none yet);
    ``has_cpu_tier``: the engine has a CPU tier (``load.cpu_blocks_total > 0``)."""

    load: WorkerLoad = field(default_factory=WorkerLoad)
    counters: EngineCounters = field(default_factory=EngineCounters)
    kv: KVCounters = field(default_factory=KVCounters)
    gpu_cached_blocks: int = 0
    last_event_seq: int = 0
    started_at_ms: int = 0

    @property
    def has_cpu_tier(self) -> bool:
        return self.load.cpu_blocks_total > 0

    @classmethod
    def read(cls, engine: LLMEngine) -> EngineStats:
        """A reading of ``engine``; call it on the engine's thread (or before that thread starts)."""
        return cls(
            load=engine.load(),
            counters=engine.counters(),
            kv=engine.kv_counters(),
            gpu_cached_blocks=engine.kv.gpu_pool.num_cached,
            last_event_seq=engine.last_event_seq,
            started_at_ms=engine.started_at_ms,
        )
