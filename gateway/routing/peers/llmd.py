"""llm-d's inference scheduler with the precise prefix-cache scorer (its "precise prefix cache
aware" configuration): weighted scorers, then the max-score picker.

- ``precise-prefix-cache-scorer``: the blocks of the prompt a pod holds, counted from the start,
  from the pods' KV events; over the pods with a hit, min-max normalised (all equal: 1.0); pods
  without a hit score 0.
- ``queue-scorer``: the pod's waiting requests, min-max normalised (shortest 1, longest 0; all
  equal: 1.0).
- ``kv-cache-utilization-scorer``: 1 - the pod's KV-cache usage.

Score = 3 x prefix + 2 x queue + 2 x KV (the weights of llm-d's documented configuration); the
highest wins, ties drawn at random.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from kvgate.gateway.routing.baselines import decide
from kvgate.gateway.routing.config import RoutingConfig
from kvgate.gateway.routing.jitter import unit
from kvgate.gateway.routing.peers.stored import stored_chunks
from kvgate.gateway.routing.types import RouteDecision, RouteReason, RouteRequest


@dataclass(frozen=True, slots=True)
class LlmdParams:
    prefix_weight: float = 3.0
    queue_weight: float = 2.0
    kv_utilization_weight: float = 2.0


@dataclass(frozen=True)
class LlmdPrecise:
    config: RoutingConfig = field(default_factory=RoutingConfig)
    params: LlmdParams = field(default_factory=LlmdParams)
    name: str = "llmd_precise"

    def choose(self, request: RouteRequest) -> RouteDecision:
        scores = self.scores(request)
        best = max(scores)
        tied = [i for i, s in enumerate(scores) if s == best]
        chosen = request.candidates[tied[int(unit(request.request_key, 0) * len(tied))]]
        reason = RouteReason.CACHE_HIT if stored_chunks(chosen) else RouteReason.LOAD_BALANCED
        return decide(chosen, request, reason)

    def scores(self, request: RouteRequest) -> list[float]:
        """Each candidate's weighted score, in candidate order."""
        hits = [stored_chunks(c) for c in request.candidates]
        prefix = _normalised([h for h in hits if h > 0])
        queue = _normalised([-c.load.waiting_seqs for c in request.candidates])
        p = self.params
        return [
            p.prefix_weight * (prefix(h) if h > 0 else 0.0)
            + p.queue_weight * queue(-c.load.waiting_seqs)
            + p.kv_utilization_weight * (1.0 - c.load.kv_usage)
            for h, c in zip(hits, request.candidates, strict=True)
        ]


def _normalised(values: Sequence[float]) -> Callable[[float], float]:
    """Min-max normalisation over ``values`` (higher is better; all equal: 1.0)."""
    lo, hi = (min(values), max(values)) if values else (0.0, 0.0)
    return lambda v: 1.0 if hi == lo else (v - lo) / (hi - lo)
