"""What the block manager answers the scheduler: prefix hits, admissions, cached-token counts."""

from __future__ import annotations

from dataclasses import dataclass

from kvgate.proto.ids import Tier
from kvgate.workers.kv.types import BlockId, BlockPair


@dataclass(frozen=True, slots=True)
class CachedTokens:
    """Prompt tokens of one sequence served from cache instead of computed: ``gpu`` from blocks the GPU
    still held, ``cpu`` from blocks swapped in from the CPU tier. 0 means none."""

    gpu: int = 0
    cpu: int = 0

    @property
    def total(self) -> int:
        return self.gpu + self.cpu


@dataclass(frozen=True, slots=True)
class PrefixHit:
    """The longest verified cached prefix of a prompt at one moment: ``blocks[i]`` is the tier and block
    id caching full block ``i``. Never all of the prompt: at least its last token is left to compute."""

    blocks: tuple[tuple[Tier, BlockId], ...]
    block_size: int

    @property
    def cached(self) -> CachedTokens:
        on_cpu = sum(tier is Tier.CPU for tier, _ in self.blocks)
        return CachedTokens((len(self.blocks) - on_cpu) * self.block_size, on_cpu * self.block_size)


@dataclass(frozen=True, slots=True)
class Admission:
    """A sequence taken on by :meth:`KVCacheManager.admit`.

    ``block_table``: its GPU blocks in order, covering the cached prefix and the ``num_new_tokens``
    tokens to compute in this step, which start at position ``cached.total``. ``swap_in``: the
    (CPU src, GPU dst) copies that bring its CPU hits back; they are also in the step's
    :class:`~kvgate.workers.kv.copy_plan.CopyPlan`, which is what the engine runs.
    """

    block_table: tuple[BlockId, ...]
    cached: CachedTokens
    num_new_tokens: int
    swap_in: tuple[BlockPair, ...]


@dataclass(frozen=True, slots=True)
class ImportedPrefix:
    """What :meth:`KVCacheManager.import_prefix` did: the prompt's first ``cached_blocks`` full blocks
    were cached here already (either tier); the next ``imported_blocks`` are now cached from imported
    KV (0: none, e.g. no free GPU block)."""

    cached_blocks: int
    imported_blocks: int
