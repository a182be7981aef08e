"""The diagnosis: why one request reused the cached tokens it did. A pure function of the request's
record, what it has in common with its tenant's recent requests (:mod:`.compare`), the workers as
the gateway sees them now, and the cache layout.

Reuse stops at one token, and everything after it is lost with it; the diagnosis names the cause of
that stop, checked in this order:

1. ``hit``: every reusable token (whole blocks before the last prompt token) was reused; and
   ``below_chunk`` for a prompt with no whole chunk to reuse (the index knows only whole chunks), what
   ever earlier requests held. Neither needs the comparison with earlier requests.
2. The same scope had it: an earlier request had more whole chunks of this prompt than were reused.
   The router chose another worker than the one the index showed holding more (``routed_elsewhere``:
   a retry after the worker chosen first failed or was busy, load, a pin, an unavailable index or
   worker, a stale index), or the blocks were gone
   (``evicted``: TTL, capacity, or the worker restarted or left; told by its eviction counters).
3. ``different_scope``: an earlier request under another scope of the tenant (model, adapter,
   ``cache_salt``, namespace) shared a longer prefix.
4. ``reordered``: an earlier request holds most of this content, in another order.
5. ``changed_content``: an earlier request shares the prefix up to ``first_divergent_token``, and
   most of what follows reappears in it (an edit in place: a date, an id, a counter).
6. ``below_chunk``: the part the prompt shares with an earlier request is shorter than a chunk.
7. ``hit`` again when an earlier request shares a prefix that was all reused and the rest is new;
   ``new_prefix`` when nothing similar was seen.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from kvgate.gateway.diagnosis.causes import Cause, Diagnosis
from kvgate.gateway.diagnosis.compare import Finding, Match
from kvgate.gateway.diagnosis.record import RequestRecord, WorkerMark
from kvgate.gateway.diagnosis.shape import WINDOW
from kvgate.gateway.diagnosis.volatile import looks_volatile
from kvgate.proto.layout import reusable_tokens

MIN_SIMILAR = WINDOW  # tokens in common below which two prompts count as unrelated (chat headers)

_LOAD_REASONS = {
    "load_override": "load",
    "hot_prefix_replicated": "load (its prefix is hot)",
    "load_balanced": "load",
    # a key decides only between workers the router saw holding as much: a better holder was unseen
    "pinned": "its prompt_cache_key chose its home among workers the router saw holding as much",
    "fallback": "the index was unavailable",
}


@dataclass(frozen=True, slots=True)
class Layout:
    """The deployment's cache layout, in tokens: the index knows whole chunks, a worker whole blocks."""

    chunk_size: int
    block_size: int

    def chunks(self, tokens: int) -> int:
        """``tokens`` rounded down to whole chunks, in tokens."""
        return tokens // self.chunk_size * self.chunk_size


def diagnose(
    record: RequestRecord,
    finding: Finding,
    workers: Mapping[str, WorkerMark],
    layout: Layout,
    excerpt: str | None = None,
) -> Diagnosis:
    """Why ``record`` reused ``record.cached_tokens`` (see the module's order). ``workers``: every
    worker the gateway knows now, by id; ``excerpt``: the prompt's text from where it parts from its
    most similar earlier request (shown only when it looks volatile)."""
    reusable = reusable_tokens(record.prompt_tokens, layout.block_size)
    if fully_reused(record, layout):
        return _hit(record, reusable)
    if layout.chunks(reusable) == 0:
        return _below_chunk(record, None, reusable, layout)
    same = finding.same if finding.same is not None and finding.same.common_tokens >= MIN_SIMILAR else None
    seen = layout.chunks(min(same.shared_tokens, reusable)) if same is not None else 0
    if same is not None and seen > record.cached_tokens:
        return _lost(record, same, workers, reusable)
    other = finding.other
    if other is not None and layout.chunks(min(other.shared_tokens, reusable)) > record.cached_tokens:
        return _different_scope(record, other, reusable)
    if same is not None and same.order.moved:
        return _reordered(record, same, reusable)
    if same is not None and same.order.reappears:
        return _changed(record, same, reusable, excerpt)
    if layout.chunks(reusable) == 0 or (same is not None and same.shared_tokens < layout.chunk_size):
        return _below_chunk(record, same, reusable, layout)
    if same is not None:
        return _hit(record, reusable, same)
    return _missed(
        record,
        Cause.NEW_PREFIX,
        reusable,
        "No recent request of yours shares a prefix with this one: it was computed fresh. "
        "Requests that repeat its opening will reuse it.",
        {},
    )


def fully_reused(record: RequestRecord, layout: Layout) -> bool:
    """Whether ``record`` reused every reusable token: then its diagnosis is ``hit``, whatever its
    tenant's earlier requests hold (no comparison needed)."""
    return record.cached_tokens >= reusable_tokens(record.prompt_tokens, layout.block_size)


def needs_comparison(prompt_tokens: int, cached_tokens: int, layout: Layout) -> bool:
    """Whether the diagnosis of a request of ``prompt_tokens`` that reused ``cached_tokens`` depends
    on its tenant's earlier requests: not when it reused every reusable token (``hit``), nor when it
    has no whole chunk to reuse (``below_chunk``)."""
    reusable = reusable_tokens(prompt_tokens, layout.block_size)
    return cached_tokens < reusable and layout.chunks(reusable) > 0


def _hit(record: RequestRecord, reusable: int, same: Match | None = None) -> Diagnosis:
    detail = f"All {record.cached_tokens} reusable tokens were read from the cache."
    evidence = _base(record, reusable)
    if same is not None:
        detail = (
            f"The {record.cached_tokens} tokens shared with request {same.request_id} were read from "
            f"the cache; the rest of the prompt (from token {same.shared_tokens}) is new."
        )
        evidence["similar_request"] = same.request_id
    return Diagnosis(Cause.HIT, detail, None, 0, evidence)


def _lost(record: RequestRecord, same: Match, workers: Mapping[str, WorkerMark], reusable: int) -> Diagnosis:
    """The same scope had more of the prompt than was reused: routed elsewhere, or evicted."""
    route = record.route
    evidence = _base(record, reusable) | {
        "similar_request": same.request_id,
        "held_by": same.worker,
        "shared_tokens": same.shared_tokens,
    }
    holder = route.best_holder
    if route.attempts > 1 and (holder or same.worker) != route.worker:  # a retry's reason is not the why
        why = f"it was retried there after {route.attempts - 1} failed or busy attempt(s)"
        return _elsewhere(record, reusable, evidence, holder or same.worker, why)
    if holder is not None and holder != route.worker and route.best_holder_tokens > record.cached_tokens:
        why = _LOAD_REASONS.get(route.reason, f"the policy ({route.reason})")
        return _elsewhere(record, reusable, evidence, holder, why)
    if route.degraded and same.worker != route.worker:
        return _elsewhere(record, reusable, evidence, same.worker, "the index was unavailable")
    return _evicted_or_elsewhere(record, same, workers.get(same.worker), reusable, evidence)


def _evicted_or_elsewhere(
    record: RequestRecord, same: Match, now: WorkerMark | None, reusable: int, evidence: dict
) -> Diagnosis:
    then = same.served
    if now is None:
        return _evicted(record, reusable, evidence, "worker_gone", f"worker {same.worker} left the cluster")
    if then is not None and now.epoch != then.epoch:
        return _evicted(record, reusable, evidence, "worker_restarted", f"worker {same.worker} restarted")
    if not now.live and same.worker != record.route.worker:
        return _elsewhere(record, reusable, evidence, same.worker, "that worker was unavailable")
    ttl = now.evicted_ttl_blocks - then.evicted_ttl_blocks if then is not None else 0
    pressure = now.evicted_pressure_blocks - then.evicted_pressure_blocks if then is not None else 0
    # which kinds, not how many: the worker's counters count every tenant's blocks (operator figures)
    evidence["evicted_since"] = {"ttl": ttl > 0, "capacity": pressure > 0}
    if ttl > 0 or pressure > 0:
        reason = "ttl" if pressure == 0 else "capacity" if ttl == 0 else "ttl_or_capacity"
        return _evicted(record, reusable, evidence, reason, _EVICTION_WORDS[reason].format(age=same.age_s))
    if same.worker != record.route.worker:
        return _elsewhere(
            record,
            reusable,
            evidence,
            same.worker,
            "the index did not show it holding the prefix (index staleness)",
        )
    return _evicted(record, reusable, evidence, "unknown", "the worker no longer held the blocks")


_EVICTION_WORDS = {
    "ttl": "its blocks expired: {age:.0f} s passed, longer than their TTL",
    "capacity": "its blocks were evicted to make room for other requests (cache capacity)",
    "ttl_or_capacity": "its blocks were evicted, by TTL expiry or to make room (both happened)",
}


def _elsewhere(record: RequestRecord, reusable: int, evidence: dict, holder: str, why: str) -> Diagnosis:
    evidence |= {"better_worker": holder, "why": why}
    detail = (
        f"Worker {holder} held more of this prompt, but the request went to {record.route.worker}: "
        f"{why}. Repeats usually return to the holder once it is less busy."
    )
    return _missed(record, Cause.ROUTED_ELSEWHERE, reusable, detail, evidence)


def _evicted(record: RequestRecord, reusable: int, evidence: dict, reason: str, words: str) -> Diagnosis:
    evidence["eviction"] = reason
    detail = (
        f"This prefix was cached by request {evidence['similar_request']} on worker "
        f"{evidence['held_by']}, but {words}. Send it more often, or pin it with a longer TTL "
        "(cache_control ttl 1h)."
    )
    return _missed(record, Cause.EVICTED, reusable, detail, evidence)


def _different_scope(record: RequestRecord, other: Match, reusable: int) -> Diagnosis:
    parts = ", ".join(other.scope_differences)
    evidence = _base(record, reusable) | {
        "similar_request": other.request_id,
        "shared_tokens": other.shared_tokens,
        "scope_differences": list(other.scope_differences),
    }
    detail = (
        f"Request {other.request_id} had the same first {other.shared_tokens} tokens under another "
        f"cache scope ({parts} differ); caches are never shared across scopes. Use the same "
        f"{parts} to reuse it."
    )
    return _missed(record, Cause.DIFFERENT_SCOPE, reusable, detail, evidence)


def _reordered(record: RequestRecord, same: Match, reusable: int) -> Diagnosis:
    evidence = _base(record, reusable) | _similar(same)
    detail = (
        f"Request {same.request_id} had the same content in another order; the prompts part at token "
        f"{same.shared_tokens}. Keep tools, documents and examples in a fixed order, stable "
        "content first."
    )
    return _missed(record, Cause.REORDERED, reusable, detail, evidence, same.shared_tokens)


def _changed(record: RequestRecord, same: Match, reusable: int, excerpt: str | None) -> Diagnosis:
    evidence = _base(record, reusable) | _similar(same)
    detail = (
        f"The prompt matches request {same.request_id} up to token {same.shared_tokens}, then "
        "differs, and most of what follows is the same."
    )
    if excerpt is not None and looks_volatile(excerpt):
        evidence["excerpt"] = excerpt
        detail += f" The changed text looks volatile: {excerpt!r}."
    detail += " Move what changes per request (dates, ids, counters) to the end of the prompt."
    return _missed(record, Cause.CHANGED_CONTENT, reusable, detail, evidence, same.shared_tokens)


def _below_chunk(record: RequestRecord, same: Match | None, reusable: int, layout: Layout) -> Diagnosis:
    evidence = _base(record, reusable) | {"chunk_size": layout.chunk_size}
    if layout.chunks(reusable) == 0:
        detail = (
            f"The prompt has {record.prompt_tokens} tokens; caching starts at one whole chunk of "
            f"{layout.chunk_size} tokens."
        )
        return _missed(record, Cause.BELOW_CHUNK, reusable, detail, evidence)
    assert same is not None
    evidence |= _similar(same)
    detail = (
        f"The prompt shares {same.shared_tokens} tokens with request {same.request_id}, less than "
        f"one chunk ({layout.chunk_size} tokens): too short to be cached. Make the common opening "
        "longer than a chunk."
    )
    return _missed(record, Cause.BELOW_CHUNK, reusable, detail, evidence, same.shared_tokens)


def _missed(
    record: RequestRecord, cause: Cause, reusable: int, detail: str, evidence: dict, first: int | None = None
) -> Diagnosis:
    first = record.cached_tokens if first is None else first
    evidence = _base(record, reusable) | evidence
    return Diagnosis(cause, detail, first, max(reusable - record.cached_tokens, 0), evidence)


def _base(record: RequestRecord, reusable: int) -> dict:
    route = record.route
    return {
        "reusable_tokens": reusable,
        "worker": route.worker,
        "route_reason": route.reason,
        "predicted_cached_tokens": route.predicted_cached_tokens,
        "best_holder": route.best_holder,
        "best_holder_tokens": route.best_holder_tokens,
        "attempts": route.attempts,
    }


def _similar(same: Match) -> dict:
    return {
        "similar_request": same.request_id,
        "shared_tokens": same.shared_tokens,
        "content_in_common": same.order.found,
        "content_anchors": same.order.anchors,
    }
