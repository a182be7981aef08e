"""The worker's KV block manager: block ids, ref counts, prefix cache, TTL, CPU offload, KV events.

Pure bookkeeping (Python + numpy, no torch): the engine owns the KV tensors and executes the block
copy plans handed out here. Start at :class:`KVCacheManager` (``manager.py``); the tier policy is in
``tiers.py``, the chunk events in ``chunks.py`` and ``publisher.py``.
"""

from kvgate.workers.kv.block import BlockKey, KVBlock
from kvgate.workers.kv.block_pool import BlockPool
from kvgate.workers.kv.config import KVCacheConfig
from kvgate.workers.kv.copy_plan import CopyPlan
from kvgate.workers.kv.imports import WriteBlocks
from kvgate.workers.kv.manager import KVCacheManager
from kvgate.workers.kv.prompt import Prompt
from kvgate.workers.kv.publisher import EventPublisher, StepEventPublisher
from kvgate.workers.kv.results import Admission, CachedTokens, ImportedPrefix, PrefixHit
from kvgate.workers.kv.tiers import KVCounters
from kvgate.workers.kv.types import BlockHash, BlockId, BlockPair, Pin, SeqId

__all__ = [
    "Admission",
    "BlockHash",
    "BlockId",
    "BlockKey",
    "BlockPair",
    "BlockPool",
    "CachedTokens",
    "CopyPlan",
    "EventPublisher",
    "ImportedPrefix",
    "KVBlock",
    "KVCacheConfig",
    "KVCacheManager",
    "KVCounters",
    "Pin",
    "PrefixHit",
    "Prompt",
    "SeqId",
    "StepEventPublisher",
    "WriteBlocks",
]
