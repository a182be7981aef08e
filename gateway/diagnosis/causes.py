"""The causes a diagnosis names, and the diagnosis itself."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

_OVERHEAD = 1024  # bytes of a diagnosis beyond its strings: the object, the evidence dict and its numbers


class Cause(StrEnum):
    """Why a request reused the cached tokens it did (the label of ``kvgate_cache_miss_tokens_total``)."""

    HIT = "hit"  # everything reusable was reused
    BELOW_CHUNK = "below_chunk"  # the shared part is shorter than one chunk: nothing to index
    NEW_PREFIX = "new_prefix"  # nothing similar was seen recently
    CHANGED_CONTENT = "changed_content"  # an earlier request shares the prefix up to a token, then differs
    REORDERED = "reordered"  # the same content as an earlier request, in another order
    DIFFERENT_SCOPE = "different_scope"  # the same prefix was seen under another scope of the tenant
    EVICTED = "evicted"  # it was cached and was removed (TTL, capacity, restart)
    ROUTED_ELSEWHERE = "routed_elsewhere"  # a worker held more of it; the router chose another


@dataclass(frozen=True, slots=True)
class Diagnosis:
    """One request's answer. ``first_divergent_token``: the first prompt token that could not be
    reused (None for a hit); ``detail``: a sentence the user can act on; ``evidence``: the facts it
    rests on (JSON-ready); ``missed_tokens``: reusable tokens that were not reused (0 for a hit)."""

    cause: Cause
    detail: str
    first_divergent_token: int | None = None
    missed_tokens: int = 0
    evidence: dict[str, Any] = field(default_factory=dict)

    @property
    def nbytes(self) -> int:
        """An estimate of the memory the diagnosis holds (the record's byte cap counts it): its detail
        and the evidence's strings (an excerpt, request ids) by length, the rest as a fixed overhead."""
        strings = sum(len(v) for v in self.evidence.values() if isinstance(v, str))
        return _OVERHEAD + len(self.detail) + strings
