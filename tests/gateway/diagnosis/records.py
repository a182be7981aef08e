"""Builders for the diagnosis tests: records of prompts given as token ids, as the recorder makes them."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import xxhash

from kvgate.gateway.diagnosis.record import RequestRecord, RouteNote, Scope, WorkerMark
from kvgate.gateway.diagnosis.shape import Shaper
from kvgate.proto.hashing import chunk_hashes
from kvgate.proto.ids import ChunkHash

SHAPER = Shaper(seed=7)
SCOPE = Scope("tiny", salt="k1:tenant-a")
CHUNK = 128  # tokens per hash of the records' chains


def chain(ids: Sequence[int] | np.ndarray, scope: Scope = SCOPE) -> bytes:
    """The prompt's hash chain as the gateway records it, from a root of its scope."""
    root = ChunkHash(xxhash.xxh3_128_digest(repr(scope).encode()))
    return b"".join(chunk_hashes(np.asarray(ids, dtype=np.uint32), root, CHUNK))


def tokens(n: int, seed: int) -> np.ndarray:
    """``n`` token ids, reproducibly, over a realistic vocabulary."""
    return np.random.default_rng(seed).integers(0, 49_000, n)


def record(
    request_id: str,
    ids: Sequence[int] | np.ndarray,
    cached: int = 0,
    *,
    tenant: str = "a",
    scope: Scope = SCOPE,
    at_s: float = 1000.0,
    route: RouteNote | None = None,
    served: WorkerMark | None = None,
) -> RequestRecord:
    ids = np.asarray(ids)
    route = route or RouteNote("w0", "new_prefix", 0)
    served = served or WorkerMark(route.worker, 1)
    return RequestRecord(
        request_id, tenant, scope, at_s, len(ids), cached, chain(ids, scope), SHAPER.shape(ids), route, served
    )
