"""Which worker the chosen one may fetch a prompt's cached prefix from, instead of computing it.

When the policy sends a request away from the worker that holds the longest prefix of its prompt (a
load override, a hot prefix copied), that prefix still exists: the chosen worker can pull its KV
blocks from the holder over the workers' own gRPC service (``KVWorker.ExportKV``) faster than it
can recompute them, and keep them as ordinary cached blocks. The router names the holder in the
decision (:class:`~.types.KVSource`); the worker decides whether to fetch and falls back to
computing whenever the fetch fails, so a wrong or stale source costs time, never an answer.
"""

from __future__ import annotations

from collections.abc import Container

from kvgate.gateway.routing.types import KVSource
from kvgate.index.types import LookupResult
from kvgate.proto.ids import Tier, WorkerId
from kvgate.proto.units import TokenCount


def held_chunks(tiers: str) -> int:
    """Leading chunks of a match that a worker holds now, in either tier: up to the first chunk
    that is only pending (being computed there; an export would stop at it)."""
    pending = tiers.find(Tier.PENDING.value)
    return len(tiers) if pending < 0 else pending


def kv_source(
    lookup: LookupResult,
    chosen: WorkerId,
    cached_tokens: TokenCount,
    prompt_tokens: TokenCount,
    chunk_size: int,
    min_tokens: int,
    request_key: int,
    among: Container[WorkerId],
) -> KVSource | None:
    """The worker ``among`` the request's candidates holding the longest prefix of the prompt, when it
    holds at least ``min_tokens`` more of the prompt than the ``cached_tokens`` that ``chosen``
    reuses; None otherwise (and always when ``min_tokens`` is 0: sources off). Among equal holders
    the one with the most chunks in its GPU tier (no swap-in before the export), then one drawn by
    ``request_key`` (exports spread over the holders). A holder the index names that is not among
    the candidates (it left, was quarantined, failed this request) is never a source: the policy
    priced the fetch from the candidates' holdings, and a fetch from it is likely to fail.
    O(cohorts)."""
    if min_tokens <= 0:
        return None
    best: tuple[int, int] = (0, 0)
    workers: list[WorkerId] = []
    for cohort in lookup.cohorts:
        held = held_chunks(cohort.tiers)
        others = [w for w in cohort.workers if w != chosen and w in among]
        if not held or not others:
            continue
        rank = (held, cohort.tiers[:held].count(Tier.GPU.value))
        if rank > best:
            best, workers = rank, others
        elif rank == best:
            workers += others
    tokens = TokenCount(min(best[0] * chunk_size, prompt_tokens))
    if not workers or tokens - cached_tokens < min_tokens:
        return None
    return KVSource(sorted(workers)[request_key % len(workers)], tokens)
