"""The default policy: the worker with the lowest estimated time to first token, hot spots skipped."""

from __future__ import annotations

from dataclasses import dataclass, field
from statistics import fmean

from kvgate.gateway.routing.config import RoutingConfig
from kvgate.gateway.routing.cost import Estimate, estimate
from kvgate.gateway.routing.types import RouteDecision, RouteReason, RouteRequest


@dataclass(frozen=True)
class KvgatePolicy:
    """Minimise estimated TTFT (uncached prefill + CPU swap-in + queue, see :mod:`.cost`) plus
    ``compute_weight`` x the prefill compute the choice adds to the cluster.

    Hot-spot guard: a worker whose queue exceeds ``hot_spot_factor`` x the mean queue (and the
    floor) is not a candidate while any other is, so shared prefixes cannot pile all traffic onto
    one worker. A ``home`` worker (prompt_cache_key) wins ties against equal estimates and is taken
    when no worker holds a prefix, unless it is hot. Ties go to the longest reuse, then to a
    rotation by ``request_key``.
    """

    config: RoutingConfig = field(default_factory=RoutingConfig)
    name: str = "kvgate"

    def choose(self, request: RouteRequest) -> RouteDecision:
        estimates = [
            estimate(c, request.prompt_tokens, request.chunk_size, self.config) for c in request.candidates
        ]
        allowed = self._not_hot(estimates)
        n = len(request.candidates)
        # candidates and estimates share their order: position i is the rotation's input
        position = {e.worker_id: i for i, e in enumerate(estimates)}
        best = min(
            allowed, key=lambda e: self._rank(e, request, (position[e.worker_id] - request.request_key) % n)
        )
        if best.reused_tokens == 0 and request.home is not None:
            home = next((e for e in allowed if e.worker_id == request.home), None)
            if home is not None:
                return _decision(home, RouteReason.PINNED, request)
        reason = RouteReason.CACHE_HIT if best.reused_tokens else RouteReason.LOAD_BALANCED
        return _decision(best, reason, request)

    def _not_hot(self, estimates: list[Estimate]) -> list[Estimate]:
        limit = max(
            self.config.hot_spot_factor * fmean(e.queue_s for e in estimates), self.config.hot_spot_floor_s
        )
        cool = [e for e in estimates if e.queue_s <= limit]
        return cool or estimates

    def _rank(self, e: Estimate, request: RouteRequest, rotation: int) -> tuple[float, int, bool, int]:
        score = round(e.score(self.config.compute_weight), 9)
        return (score, -e.reused_tokens, e.worker_id != request.home, rotation)


def _decision(e: Estimate, reason: RouteReason, request: RouteRequest) -> RouteDecision:
    return RouteDecision(
        worker_id=e.worker_id,
        reason=reason,
        predicted_cached_tokens=e.reused_tokens,
        matched_chunks=-(-e.reused_tokens // request.chunk_size),
        estimated_ttft_s=e.ttft_s,
    )
