"""Typed identifiers shared by the gateway, the workers and the index."""

from __future__ import annotations

from enum import StrEnum
from typing import NewType

ChunkHash = NewType("ChunkHash", bytes)
"""128-bit chained XXH3 digest (16 bytes) of a full chunk and everything before it."""

WorkerId = NewType("WorkerId", str)
"""Stable name of a worker slot (e.g. ``worker-0``); survives restarts, unlike the epoch."""

Epoch = NewType("Epoch", int)
"""Incarnation number of a worker; strictly increases across restarts of one WorkerId."""

SeqNo = NewType("SeqNo", int)
"""Per-(worker, epoch) sequence number of an event batch; the first batch of an epoch is 1."""

CHUNK_HASH_BYTES = 16


class Tier(StrEnum):
    """Where a worker holds a chunk. ``PENDING`` is the gateway's own short-lived routing hint."""

    GPU = "G"
    CPU = "C"
    PENDING = "P"
