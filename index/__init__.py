"""The global prefix index (see :mod:`kvgate.index.base` for the interface)."""

from kvgate.index.base import PrefixIndex
from kvgate.index.memory import MemoryPrefixIndex
from kvgate.index.redis_index import RedisPrefixIndex, redis_client
from kvgate.index.settings import IndexSettings
from kvgate.index.types import (
    ApplyResult,
    ApplyStatus,
    DuplicateWorkerError,
    IndexUnavailableError,
    LookupResult,
    PrefixMatch,
    StaleEpochError,
    WorkerStatus,
)

__all__ = [
    "ApplyResult",
    "ApplyStatus",
    "DuplicateWorkerError",
    "IndexSettings",
    "IndexUnavailableError",
    "LookupResult",
    "MemoryPrefixIndex",
    "PrefixIndex",
    "PrefixMatch",
    "RedisPrefixIndex",
    "StaleEpochError",
    "WorkerStatus",
    "redis_client",
]
