"""The default policy: the worker with the lowest estimated time to first token, hot spots skipped."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from statistics import fmean

from kvgate.gateway.routing.config import RoutingConfig
from kvgate.gateway.routing.cost import Estimate, estimate, queue_seconds
from kvgate.gateway.routing.jitter import unit
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
        # candidates and estimates share their order: position i is the rotation's and jitter's input
        position = {e.worker_id: i for i, e in enumerate(estimates)}
        allowed = [(position[e.worker_id], e) for e in self._not_hot(estimates)]
        home = next((e for _, e in allowed if e.worker_id == request.home), None)
        return self._decide(self._pick(allowed, request), home, request)

    def queue_s(self, candidate: Candidate) -> float:
        """The queue part of a candidate's estimate (what :class:`GroupedRequest` carries)."""
        return queue_seconds(candidate, self.config)

    def choose_grouped(self, request: GroupedRequest) -> RouteDecision:
        """:meth:`choose`'s decision from cohorts. Within a cohort the estimates differ only by
        queue, so a member can be among the near-ties only if its queue exceeds the cohort's
        shortest by at most the best cohort's lead plus the window; estimates are built for those
        alone. O(workers) float comparisons, O(cohorts + near-ties) estimates."""
        queue_s = request.queue_s
        limit = self._hot_limit(queue_s)
        bound = limit if any(q <= limit for q in queue_s) else math.inf
        groups: list[tuple[list[int], str]] = []
        held: set[int] = set()
        for cohort in request.cohorts:
            members = [request.position[w] for w in cohort.workers if w in request.position]
            held.update(members)
            groups.append((members, cohort.tiers))
        rest = [i for i in range(len(queue_s)) if i not in held] if held else list(range(len(queue_s)))
        groups.append((rest, ""))
        groups = [([i for i in m if queue_s[i] <= bound], tiers) for m, tiers in groups]
        groups = [(m, tiers) for m, tiers in groups if m]
        fastest = [self._estimate(request, min(m, key=queue_s.__getitem__), tiers) for m, tiers in groups]
        weight = self.config.compute_weight
        best = min(e.score(weight) for e in fastest)
        reach = best + self._window(best) + 1e-6  # slack for float rounding; _pick tests exactly
        finalists = [
            (i, self._estimate(request, i, tiers))
            for (members, tiers), lead in zip(groups, fastest, strict=True)
            for i in members
            if queue_s[i] - lead.queue_s <= reach - lead.score(weight)
        ]
        home = None
        if request.home in request.position and queue_s[i := request.position[request.home]] <= bound:  # type: ignore[index]
            tiers = next((c.tiers for c in request.cohorts if request.home in c.workers), "")
            home = self._estimate(request, i, tiers)
        return self._decide(self._pick(finalists, request), home, request)

    def _pick(
        self, finalists: list[tuple[int, Estimate]], request: RouteRequest | GroupedRequest
    ) -> Estimate:
        """The best-ranked of ``finalists`` ((position, estimate); every choice that can win) whose
        score is within the near-tie window of the best score."""
        weight = self.config.compute_weight
        best = min(e.score(weight) for _, e in finalists)
        window = self._window(best)
        near = [(i, e) for i, e in finalists if e.score(weight) <= best + window]
        n = len(request.candidates)
        return min(near, key=lambda f: self._rank(f[1], request, f[0], n, window))[1]

    def _decide(
        self, chosen: Estimate, home: Estimate | None, request: RouteRequest | GroupedRequest
    ) -> RouteDecision:
        """``chosen``, unless it reuses nothing and the pinned home worker (``home``: None when
        absent or hot) can take the request."""
        if chosen.reused_tokens == 0 and home is not None and request.home_pinned:
            return _decision(home, RouteReason.PINNED, request)
        reason = RouteReason.CACHE_HIT if chosen.reused_tokens else RouteReason.LOAD_BALANCED
        return _decision(chosen, reason, request)

    def _window(self, best_score: float) -> float:
        return self.config.near_tie_ratio * best_score + self.config.near_tie_s

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
        self, e: Estimate, request: RouteRequest | GroupedRequest, i: int, n: int, window: float
    ) -> tuple[float, int, bool, int]:
        """Score plus a handicap drawn per request in [0, window) (none for the home worker), then
        the longest reuse, the home worker, a rotation by ``request_key``."""
        away = e.worker_id != request.home
        handicap = unit(request.request_key, i) * window if away else 0.0
        score = round(e.score(self.config.compute_weight) + handicap, 9)
        return (score, -e.reused_tokens, away, (i - request.request_key) % n)


def _decision(e: Estimate, reason: RouteReason, request: RouteRequest | GroupedRequest) -> RouteDecision:
    return RouteDecision(
        worker_id=e.worker_id,
        reason=reason,
        predicted_cached_tokens=e.reused_tokens,
        matched_chunks=-(-e.reused_tokens // request.chunk_size),
        estimated_ttft_s=e.ttft_s,
    )
