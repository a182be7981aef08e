"""The choice while the index does not answer: the fallback policy's (load alone), except that a
``prompt_cache_key``'s home keeps the key's requests while it is not a hot spot."""

from __future__ import annotations

from kvgate.gateway.routing.baselines import decide
from kvgate.gateway.routing.config import RoutingConfig
from kvgate.gateway.routing.cost import hot_limit, queue_seconds
from kvgate.gateway.routing.types import RouteDecision, RouteReason, RouteRequest, RoutingPolicy


def fallback_choice(fallback: RoutingPolicy, request: RouteRequest, config: RoutingConfig) -> RouteDecision:
    """``fallback``'s decision for ``request``; the pinned home (a prompt_cache_key's worker)
    instead when it is a candidate whose queue is within the hot-spot limit (``config``), so the
    key's requests stay together while no cache view is there to keep them so. Soft homes are not
    followed here. The reason is always ``fallback``."""
    decision = fallback.choose(request)
    if request.home is None or not request.home_pinned:
        return _as_fallback(decision)
    candidates = request.candidates
    at = next((i for i, c in enumerate(candidates) if c.worker_id == request.home), None)
    queues = [queue_seconds(c, config) for c in candidates]
    if at is None or queues[at] > hot_limit(queues, config):
        return _as_fallback(decision)
    return _as_fallback(decide(candidates[at], request, RouteReason.FALLBACK))


def _as_fallback(decision: RouteDecision) -> RouteDecision:
    return RouteDecision(decision.worker_id, RouteReason.FALLBACK, 0, 0, decision.estimated_ttft_s)
