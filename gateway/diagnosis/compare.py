"""A request against its tenant's recent requests: the earlier request most like it in its own cache
scope, and the one sharing the longest prefix under another scope of the tenant. Pure."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from kvgate.gateway.diagnosis.record import RequestRecord, WorkerMark
from kvgate.gateway.diagnosis.shape import ANCHOR_EVERY, Order, order, shared_prefix
from kvgate.proto.ids import CHUNK_HASH_BYTES


@dataclass(frozen=True, slots=True)
class Match:
    """An earlier request of the tenant: ``shared_tokens`` leading tokens in common with this one,
    how this one's content after them appears in it (``order``; under another scope, where only the
    shared prefix counts, not compared: empty), the parts of its scope that differ (empty: the same
    scope), the worker it went to and what that worker looked like when it finished."""

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
        return common_tokens(self.shared_tokens, self.order)


@dataclass(frozen=True, slots=True)
class Finding:
    """``same``: the most similar earlier request in the same scope (None: none shares anything);
    ``other``: the earlier request under another scope with the longest shared prefix (None: none)."""

    same: Match | None
    other: Match | None


def common_tokens(shared_tokens: int, order: Order) -> int:
    """About how many tokens of content two prompts have in common: the shared prefix, and about
    ``ANCHOR_EVERY`` tokens per anchor of the rest found in the other."""
    return shared_tokens + order.found * ANCHOR_EVERY


def compare(record: RequestRecord, earlier: Sequence[RequestRecord], chunk_size: int) -> Finding:
    """``record`` against ``earlier`` (its tenant's, newest first; other tenants' are skipped). Ties
    go to the newest. Per earlier request, the shared prefix and (same scope) the order of the rest
    are computed; a :class:`Match` is built only for the best so far. ``chunk_size``: the tokens per
    hash of the records' chains; the chunks whose hashes two chains share are not compared again."""
    same: Match | None = None
    other: Match | None = None
    best_same, best_other = 0, 0
    for before in earlier:
        if before.tenant != record.tenant or before.request_id == record.request_id:
            continue
        known = shared_chunks(record.chunk_hashes, before.chunk_hashes) * chunk_size
        shared = shared_prefix(record.shape, before.shape, known)
        differences = record.scope.differences(before.scope)
        if differences:
            if shared > best_other:
                other, best_other = _match(record, before, shared, _UNCOMPARED, differences), shared
            continue
        found = order(record.shape, before.shape, shared)
        common = common_tokens(shared, found)
        if common > best_same:
            same, best_same = _match(record, before, shared, found, ()), common
    return Finding(same, other)


_UNCOMPARED = Order(0, 0, 0)


def shared_chunks(a: bytes, b: bytes) -> int:
    """Leading chunks two chains (``CHUNK_HASH_BYTES`` per chunk) have in common. A chunk's hash
    covers every token before it, so equal hashes at chunk k mean equal chains up to k: a binary
    search on single hashes, the last common chunk tried first (prompts sharing all their whole
    chunks, as a conversation's turns and one system prompt's requests do)."""
    size = CHUNK_HASH_BYTES
    n = min(len(a), len(b)) // size
    if n == 0 or a[(n - 1) * size : n * size] == b[(n - 1) * size : n * size]:
        return n
    low, high = 0, n - 1  # chunks [0, low) are shared; chunk `high` is not
    while low < high:
        mid = (low + high) // 2
        if a[mid * size : (mid + 1) * size] == b[mid * size : (mid + 1) * size]:
            low = mid + 1
        else:
            high = mid
    return low


def _match(
    record: RequestRecord, before: RequestRecord, shared: int, found: Order, differences: tuple[str, ...]
) -> Match:
    return Match(
        before.request_id,
        shared,
        found,
        differences,
        before.route.worker,
        before.served,
        max(record.at_s - before.at_s, 0.0),
    )
