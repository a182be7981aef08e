"""A request against its tenant's recent requests: the earlier request most like it in its own cache
scope, and the one sharing the longest prefix under another scope of the tenant. Pure."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from kvgate.gateway.diagnosis.record import RequestRecord, WorkerMark
from kvgate.gateway.diagnosis.shape import ANCHOR_EVERY, Order, order, shared_prefix


@dataclass(frozen=True, slots=True)
class Match:
    """An earlier request of the tenant: ``shared_tokens`` leading tokens in common with this one,
    how this one's content after them appears in it (``order``), the parts of its scope that differ
    (empty: the same scope), the worker it went to and what that worker looked like when it finished."""

    request_id: str
    shared_tokens: int
    order: Order
    scope_differences: tuple[str, ...]
    worker: str
    served: WorkerMark | None
    age_s: float

    @property
    def common_tokens(self) -> int:
        """About how many tokens of content the two have in common, in any order."""
        return self.shared_tokens + self.order.found * ANCHOR_EVERY


@dataclass(frozen=True, slots=True)
class Finding:
    """``same``: the most similar earlier request in the same scope (None: none shares anything);
    ``other``: the earlier request under another scope with the longest shared prefix (None: none)."""

    same: Match | None
    other: Match | None


def compare(record: RequestRecord, earlier: Sequence[RequestRecord]) -> Finding:
    """``record`` against ``earlier`` (its tenant's, newest first; other tenants' are skipped)."""
    same: Match | None = None
    other: Match | None = None
    for before in earlier:
        if before.tenant != record.tenant or before.request_id == record.request_id:
            continue
        match = _match(record, before)
        if not match.scope_differences:
            if match.common_tokens > 0 and (same is None or match.common_tokens > same.common_tokens):
                same = match
        elif match.shared_tokens > 0 and (other is None or match.shared_tokens > other.shared_tokens):
            other = match
    return Finding(same, other)


def _match(record: RequestRecord, before: RequestRecord) -> Match:
    shared = shared_prefix(record.shape, before.shape)
    return Match(
        before.request_id,
        shared,
        order(record.shape, before.shape, shared),
        record.scope.differences(before.scope),
        before.route.worker,
        before.served,
        max(record.at_s - before.at_s, 0.0),
    )
