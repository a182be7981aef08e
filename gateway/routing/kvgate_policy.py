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

TIE_S = 1e-9
"""Scores this close are equal (float rounding apart): exact ties, broken by reuse, home, rotation."""


@dataclass(frozen=True)
class KvgatePolicy:
    """Minimise estimated TTFT (uncached prefill + CPU swap-in + queue, see :mod:`.cost`) plus
    ``compute_weight`` x the prefill compute the choice adds to the cluster.

    Hot-spot guard: a worker whose queue exceeds ``hot_spot_factor`` x the mean queue (and the
    floor) is not a candidate while any other is, so shared prefixes cannot pile all traffic onto
    one worker. A ``home`` worker (prompt_cache_key) wins ties against equal estimates and is taken
    when no worker holds a prefix, unless it is hot (a soft home only wins near-ties). Choices
    within the near-tie window (``near_tie_ratio``, ``near_tie_s``) of the best score are ranked
    with a random handicap fixed by ``request_key``; exact ties then go to the longest reuse, the
    home worker, a rotation by ``request_key``.
    """

    config: RoutingConfig = field(default_factory=RoutingConfig)
    name: str = "kvgate"

    def choose(self, request: RouteRequest) -> RouteDecision:
        estimates = [
            estimate(c, request.prompt_tokens, request.chunk_size, self.config) for c in request.candidates
        ]
        weight = self.config.compute_weight
        # candidates and estimates share their order: position i is the rotation's and jitter's input
        allowed = {e.worker_id for e in self._not_hot(estimates)}
        scored = [
            (i, e.score(weight), e.reused_tokens) for i, e in enumerate(estimates) if e.worker_id in allowed
        ]
        home = next((e for e in estimates if e.worker_id == request.home and e.worker_id in allowed), None)
        most = max(e.reused_tokens for e in estimates)
        cool = any(e.reused_tokens == most and e.worker_id in allowed for e in estimates)
        return self._decide(estimates[self._pick(scored, request)], home, request, (most, cool))

    def queue_s(self, candidate: Candidate) -> float:
        """The queue part of a candidate's estimate (what :class:`GroupedRequest` carries)."""
        return queue_seconds(candidate, self.config)

    def choose_grouped(self, request: GroupedRequest) -> RouteDecision:
        """:meth:`choose`'s decision from cohorts. Within a cohort the estimates differ only by
        queue: one estimate per cohort gives every member's score by the same arithmetic, so only
        members within the near-tie window are scored, and only the winner's estimate is built.
        O(workers) float comparisons, O(cohorts) estimates."""
        queue_s = request.queue_s
        limit = self._hot_limit(queue_s)
        bound = limit if min(queue_s) <= limit else math.inf
        groups: list[tuple[list[int], str]] = []
        held: set[int] = set()
        for cohort in request.cohorts:
            members = [request.position[w] for w in cohort.workers if w in request.position]
            held.update(members)
            groups.append((members, cohort.tiers))
        rest = [i for i in range(len(queue_s)) if i not in held] if held else list(range(len(queue_s)))
        groups.append((rest, ""))
        held_by = self._reuse_of_groups(request, groups, bound)
        weight = self.config.compute_weight
        leads: list[tuple[list[int], str, float, float, int]] = []  # members, tiers, part, min queue, reused
        for members, tiers in groups:
            allowed = members if bound == math.inf else [i for i in members if queue_s[i] <= bound]
            if allowed:
                lead = self._estimate(request, allowed[0], tiers)
                part = lead.prefill_s + lead.swap_in_s  # as Estimate.score adds it up, to the last bit
                leads.append(
                    (allowed, tiers, part, min(map(queue_s.__getitem__, allowed)), lead.reused_tokens)
                )
        best = min((part + q) + weight * part for _, _, part, q, _ in leads)
        reach = best + self._window(best) + 1e-6  # slack for float rounding; _pick tests exactly
        scored: list[tuple[int, float, int]] = []
        tiers_at: dict[int, str] = {}
        for allowed, tiers, part, q_min, reused in leads:
            top = q_min + (reach - ((part + q_min) + weight * part))
            near = [i for i in allowed if queue_s[i] <= top]
            scored += [(i, (part + queue_s[i]) + weight * part, reused) for i in near]
            tiers_at.update(dict.fromkeys(near, tiers))
        chosen = self._pick(scored, request)
        home = None
        if (i := request.position.get(request.home)) is not None and queue_s[i] <= bound:  # type: ignore[arg-type]
            tiers = next((c.tiers for c in request.cohorts if request.home in c.workers), "")
            home = self._estimate(request, i, tiers)
        return self._decide(self._estimate(request, chosen, tiers_at[chosen]), home, request, held_by)

    def _reuse_of_groups(
        self, request: GroupedRequest, groups: list[tuple[list[int], str]], bound: float
    ) -> tuple[int, bool]:
        """(the longest reuse any candidate offers, whether a worker offering it is not hot)."""
        reuse = [(self._estimate(request, members[0], tiers).reused_tokens, members)
                 for members, tiers in groups if members and tiers]  # fmt: skip
        most = max((r for r, _ in reuse), default=0)
        cool = any(r == most and any(request.queue_s[i] <= bound for i in members) for r, members in reuse)
        return most, cool or most == 0

    def _pick(self, scored: list[tuple[int, float, int]], request: RouteRequest | GroupedRequest) -> int:
        """The position of the best-ranked of ``scored`` ((position, score, reused tokens) of every
        allowed choice) among those within the near-tie window of the best score."""
        best = min(score for _, score, _ in scored)
        window = self._window(best)
        near = [f for f in scored if f[1] <= best + window + TIE_S]  # equal to 9 decimals: a tie
        n = len(request.candidates)
        return min(near, key=lambda f: self._rank(f, request, n, window))[0]

    def _decide(
        self,
        chosen: Estimate,
        home: Estimate | None,
        request: RouteRequest | GroupedRequest,
        held: tuple[int, bool],
    ) -> RouteDecision:
        """``chosen``, unless it reuses nothing and the pinned home worker (``home``: None when
        absent or hot) can take the request. ``held``: the longest reuse any candidate offers, and
        whether a worker offering it was allowed (not a hot spot): they name the reason."""
        if chosen.reused_tokens == 0 and home is not None and request.home_pinned:
            return _decision(home, RouteReason.PINNED, request)
        return _decision(chosen, _reason(chosen.reused_tokens, *held), request)

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
        self, f: tuple[int, float, int], request: RouteRequest | GroupedRequest, n: int, window: float
    ) -> tuple[float, int, bool, int]:
        """Score plus a handicap in [0, window) (none for the home worker), then the longest reuse,
        the home worker, a rotation by ``request_key``. The handicap blends a draw fixed per
        request (weight 1 - ``placement_weight``) with the worker's share of recent new content
        times the share of the prompt it would place there as new (weight ``placement_weight``):
        near-tied placements of new content go where little new content went lately."""
        i, score, reused = f
        away = request.candidates[i].worker_id != request.home
        shares = request.placed
        beta = self.config.placement_weight if shares is not None else 0.0
        share = shares(request.candidates[i].worker_id) if shares is not None and beta else 0.0
        placed = share * (1 - reused / max(request.prompt_tokens, 1))
        handicap = ((1 - beta) * unit(request.request_key, i) + beta * placed) * window if away else 0.0
        return (round(score + handicap, 9), -reused, away, (i - request.request_key) % n)  # 9: TIE_S


def _reason(reused: int, most: int, holder_allowed: bool) -> RouteReason:
    """Why a choice reusing ``reused`` tokens was made when the best any worker offers is ``most``."""
    if most == 0:
        return RouteReason.NEW_PREFIX
    if reused >= most:
        return RouteReason.CACHE_HIT
    return RouteReason.LOAD_OVERRIDE if holder_allowed else RouteReason.HOT_PREFIX


def _decision(e: Estimate, reason: RouteReason, request: RouteRequest | GroupedRequest) -> RouteDecision:
    return RouteDecision(
        worker_id=e.worker_id,
        reason=reason,
        predicted_cached_tokens=e.reused_tokens,
        matched_chunks=-(-e.reused_tokens // request.chunk_size),
        estimated_ttft_s=e.ttft_s,
    )
