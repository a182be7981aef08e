"""Prefix affinity in the style of SGLang's cache-aware router: balance gate, then longest match."""

from __future__ import annotations

from dataclasses import dataclass, field

from kvgate.gateway.routing.baselines import decide, requests_on
from kvgate.gateway.routing.config import RoutingConfig
from kvgate.gateway.routing.types import RouteDecision, RouteReason, RouteRequest


@dataclass(frozen=True)
class PrefixAffinity:
    """If loads are imbalanced (max - min > abs threshold and max > rel threshold x min), the least
    loaded worker; else, if the longest match covers more than ``cache_threshold`` of the prompt,
    that worker; else the worker with the most free KV blocks (SGLang: the smallest tree)."""

    config: RoutingConfig = field(default_factory=RoutingConfig)
    name: str = "prefix_affinity"

    def choose(self, request: RouteRequest) -> RouteDecision:
        loads = [requests_on(c) for c in request.candidates]
        lo, hi = min(loads), max(loads)
        cfg = self.config
        if hi - lo > cfg.balance_abs_threshold and hi > cfg.balance_rel_threshold * lo:
            return decide(min(request.candidates, key=requests_on), request, RouteReason.LOAD_BALANCED)
        best = max(request.candidates, key=lambda c: c.matched_chunks)
        covered = best.matched_chunks * request.chunk_size / max(request.prompt_tokens, 1)
        if best.matched_chunks and covered > cfg.cache_threshold:
            return decide(best, request, RouteReason.CACHE_HIT)
        roomiest = max(request.candidates, key=lambda c: c.load.gpu_blocks_free)
        return decide(roomiest, request, RouteReason.LOAD_BALANCED)
