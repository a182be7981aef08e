"""What one simulated run measures, per request and per policy, and the report's JSON shape."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from kvgate.sim.kvcache import CacheCounters


@dataclass(frozen=True, slots=True)
class RequestRecord:
    """One request's outcome. ``cached_tokens`` is what the worker actually reused (GPU or CPU tier),
    ``predicted_cached_tokens`` what the policy expected; times are simulated seconds."""

    worker: int
    prompt_tokens: int
    cached_tokens: int
    swapped_tokens: int
    predicted_cached_tokens: int
    ttft_s: float
    queue_s: float
    reason: str
    estimated_ttft_s: float | None = None
    fetched_tokens: int = 0  # of cached_tokens, fetched from another worker before the prefill


@dataclass(frozen=True, slots=True)
class PolicyResult:
    """The numbers of one policy. ``hit_rate`` is token-weighted (cached / prompt tokens);
    ``imbalance`` is max over mean of the tokens each worker prefilled (1.0 = perfectly even);
    ``prediction_error`` is sum |predicted - actual cached| over prompt tokens;
    ``ttft_estimate_bias_s`` is the mean of (the policy's TTFT estimate - the simulated TTFT), None for
    policies that do not estimate. ``lost_by_reason``: where the hit rate went -- per decision reason,
    the prompt tokens that one cache keeping every chunk forever would have reused and the chosen
    worker did not, over all prompt tokens (a request queued behind a later arrival may reuse more
    than that cache; such gains are not netted, so the shares add up to at least unlimited - hit).
    ``warm_up_tokens``: prompt tokens the router asked workers to prefill ahead of demand (warm-ups:
    counted in ``worker_prefill_tokens`` and the imbalance, in no request's hit rate).
    ``fetch_rate``: the prompt tokens whose KV the chosen worker fetched from another worker (its
    decision's KV source) instead of computing them, over all prompt tokens; they count in
    ``hit_rate`` (no worker computed them), so ``hit_rate - fetch_rate`` is what the chosen workers'
    own caches reused."""

    hit_rate: float
    imbalance: float
    ttft_p50_s: float
    ttft_p99_s: float
    ttft_mean_s: float
    queue_p99_s: float
    cpu_hit_rate: float
    prediction_error: float
    ttft_estimate_bias_s: float | None
    reasons: dict[str, int]
    evictions: dict[str, int]
    worker_prefill_tokens: list[int] = field(default_factory=list)
    wall_s: float = 0.0
    lost_by_reason: dict[str, float] = field(default_factory=dict)
    warm_up_tokens: int = 0
    fetch_rate: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def summarize(
    records: Sequence[RequestRecord],
    worker_prefill_tokens: Sequence[int],
    counters: Sequence[CacheCounters],
    wall_s: float,
    unlimited: Sequence[int] = (),
) -> PolicyResult:
    """The policy's numbers from its request records (non-empty, in the workload's order) and its
    workers' totals; ``unlimited``: each request's reuse in the unlimited cache
    (:func:`.reference.unlimited_reuse`), for ``lost_by_reason`` (empty without it)."""
    prompt = sum(r.prompt_tokens for r in records)
    ttft = np.array([r.ttft_s for r in records])
    queue = np.array([r.queue_s for r in records])
    return PolicyResult(
        hit_rate=sum(r.cached_tokens for r in records) / prompt,
        imbalance=imbalance(worker_prefill_tokens),
        ttft_p50_s=float(np.percentile(ttft, 50)),
        ttft_p99_s=float(np.percentile(ttft, 99)),
        ttft_mean_s=float(ttft.mean()),
        queue_p99_s=float(np.percentile(queue, 99)),
        cpu_hit_rate=sum(r.swapped_tokens for r in records) / prompt,
        prediction_error=sum(abs(r.predicted_cached_tokens - r.cached_tokens) for r in records) / prompt,
        ttft_estimate_bias_s=_estimate_bias(records),
        reasons=dict(Counter(r.reason for r in records)),
        evictions=_eviction_totals(counters),
        worker_prefill_tokens=list(worker_prefill_tokens),
        wall_s=wall_s,
        lost_by_reason=lost_by_reason(records, unlimited, prompt),
        fetch_rate=sum(r.fetched_tokens for r in records) / prompt,
    )


def lost_by_reason(
    records: Sequence[RequestRecord], unlimited: Sequence[int], prompt: int
) -> dict[str, float]:
    """Per reason, the tokens of ``unlimited`` (one per record, same order) that the record did not
    reuse, over ``prompt`` tokens; reasons that lost nothing are left out, and so is everything when
    ``unlimited`` is empty. ValueError when it is not one per record."""
    if not unlimited:
        return {}
    if len(unlimited) != len(records):
        raise ValueError(f"{len(unlimited)} unlimited-cache figures for {len(records)} requests")
    lost: Counter[str] = Counter()
    for record, reuse in zip(records, unlimited, strict=True):
        if reuse > record.cached_tokens:
            lost[record.reason] += reuse - record.cached_tokens
    return {reason: tokens / prompt for reason, tokens in lost.most_common()}


def imbalance(per_worker: Sequence[int]) -> float:
    """max / mean of ``per_worker``; 1.0 when all are equal, including all zero."""
    mean = sum(per_worker) / len(per_worker)
    return max(per_worker) / mean if mean > 0 else 1.0


def _estimate_bias(records: Sequence[RequestRecord]) -> float | None:
    errors = [r.estimated_ttft_s - r.ttft_s for r in records if r.estimated_ttft_s is not None]
    return sum(errors) / len(errors) if errors else None


def _eviction_totals(counters: Sequence[CacheCounters]) -> dict[str, int]:
    totals: Counter[str] = Counter()
    for c in counters:
        totals.update(asdict(c))
    return dict(totals)


@dataclass(frozen=True, slots=True)
class SimReport:
    """A whole run: the references and every policy, side by side on one trace."""

    requests: int
    prompt_tokens: int
    unlimited_hit_rate: float
    pooled_hit_rate: float
    policies: dict[str, PolicyResult]
    settings: dict[str, Any]

    def to_json(self) -> dict[str, Any]:
        """The ``--json`` object: the documented keys first, extras after."""
        return {
            "requests": self.requests,
            "unlimited_hit_rate": self.unlimited_hit_rate,
            "pooled_hit_rate": self.pooled_hit_rate,
            "policies": {name: result.to_json() for name, result in self.policies.items()},
            "prompt_tokens": self.prompt_tokens,
            "settings": self.settings,
        }
