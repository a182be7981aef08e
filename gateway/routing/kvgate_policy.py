"""The default policy: the worker with the lowest estimated time to first token, hot spots skipped."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from statistics import fmean

from kvgate.gateway.routing.config import RoutingConfig
from kvgate.gateway.routing.cost import Estimate, estimate, queue_seconds
from kvgate.gateway.routing.types import Candidate, GroupedRequest, RouteDecision, RouteReason, RouteRequest
from kvgate.index.types import PrefixMatch


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

    def queue_s(self, candidate: Candidate) -> float:
        """The queue part of a candidate's estimate (what :class:`GroupedRequest` carries)."""
        return queue_seconds(candidate, self.config)

    def choose_grouped(self, request: GroupedRequest) -> RouteDecision:
        """:meth:`choose`'s decision from cohorts. Within a cohort the estimates differ only by
        queue, so only its near-fastest members (queue within 2e-9 s of its fastest: the score is
        ranked rounded to 1e-9) can win; estimates are built for those alone. O(workers) float
        comparisons, O(cohorts) estimates."""
        queue_s = request.queue_s
        limit = self._hot_limit(queue_s)
        bound = limit if any(q <= limit for q in queue_s) else math.inf
        finalists: list[tuple[int, Estimate]] = []
        held: set[int] = set()
        for cohort in request.cohorts:
            members = [request.position[w] for w in cohort.workers if w in request.position]
            held.update(members)
            finalists += self._fastest(request, members, cohort.tiers, bound)
        rest = [i for i in range(len(queue_s)) if i not in held] if held else range(len(queue_s))
        finalists += self._fastest(request, rest, "", bound)
        n = len(queue_s)
        best = min(finalists, key=lambda f: self._rank(f[1], request, (f[0] - request.request_key) % n))[1]
        if best.reused_tokens == 0 and request.home in request.position:
            i = request.position[request.home]  # type: ignore[index]
            if queue_s[i] <= bound:
                tiers = next((c.tiers for c in request.cohorts if request.home in c.workers), "")
                return _decision(self._estimate(request, i, tiers), RouteReason.PINNED, request)
        reason = RouteReason.CACHE_HIT if best.reused_tokens else RouteReason.LOAD_BALANCED
        return _decision(best, reason, request)

    def _fastest(
        self, request: GroupedRequest, members, tiers: str, bound: float
    ) -> list[tuple[int, Estimate]]:
        """The estimates of the members whose queue is within 2e-9 s of the group's shortest."""
        queue_s = request.queue_s
        allowed = [i for i in members if queue_s[i] <= bound]
        if not allowed:
            return []
        near = min(queue_s[i] for i in allowed) + 2e-9
        return [(i, self._estimate(request, i, tiers)) for i in allowed if queue_s[i] <= near]

    def _estimate(self, request: GroupedRequest, i: int, tiers: str) -> Estimate:
        candidate = request.candidates[i]
        match = PrefixMatch(candidate.worker_id, tiers) if tiers else None
        return estimate(
            replace(candidate, match=match), request.prompt_tokens, request.chunk_size, self.config
        )

    def _hot_limit(self, queue_s: Sequence[float]) -> float:
        return max(self.config.hot_spot_factor * fmean(queue_s), self.config.hot_spot_floor_s)

    def _not_hot(self, estimates: list[Estimate]) -> list[Estimate]:
        limit = self._hot_limit([e.queue_s for e in estimates])
        cool = [e for e in estimates if e.queue_s <= limit]
        return cool or estimates

    def _rank(
        self, e: Estimate, request: RouteRequest | GroupedRequest, rotation: int
    ) -> tuple[float, int, bool, int]:
        score = round(e.score(self.config.compute_weight), 9)
        return (score, -e.reused_tokens, e.worker_id != request.home, rotation)


def _decision(e: Estimate, reason: RouteReason, request: RouteRequest | GroupedRequest) -> RouteDecision:
    return RouteDecision(
        worker_id=e.worker_id,
        reason=reason,
        predicted_cached_tokens=e.reused_tokens,
        matched_chunks=-(-e.reused_tokens // request.chunk_size),
        estimated_ttft_s=e.ttft_s,
    )
