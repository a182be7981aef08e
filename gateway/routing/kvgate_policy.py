"""The default policy: the worker with the lowest estimated time to first token, hot spots skipped."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import ClassVar

from kvgate.gateway.routing.charges import (
    Block,
    Charge,
    block_charge,
    choice_weights,
    no_charge,
    session_charge,
)
from kvgate.gateway.routing.config import RoutingConfig
from kvgate.gateway.routing.cost import (
    Estimate,
    estimate,
    fetches,
    fullness,
    hot_limit,
    occupancy,
    queue_seconds,
)
from kvgate.gateway.routing.jitter import unit
from kvgate.gateway.routing.kv_source import held_chunks
from kvgate.gateway.routing.types import Candidate, GroupedRequest, RouteDecision, RouteReason, RouteRequest
from kvgate.index.types import PrefixMatch

_Lead = tuple[list[int], str, float, float, float, int]
"""A cohort's allowed members, tiers, prefill + swap-in seconds, weighted compute, least queue, reuse."""

TIE_S = 1e-9
"""Scores this close are equal (float rounding apart): exact ties, broken by reuse, home, rotation."""


@dataclass(frozen=True)
class KvgatePolicy:
    """Minimise estimated TTFT (uncached prefill + CPU swap-in + queue, see :mod:`.cost`) plus
    ``compute_weight`` x the prefill compute the choice adds to the cluster.

    Hot-spot guard: a worker whose queue exceeds ``hot_spot_factor`` x the mean queue (and the
    floor) is not a candidate while a cool worker would answer sooner: the compute weight never
    keeps a request waiting on a hot spot for the sake of its cache. A hot worker that holds or is
    computing what the prompt needs stays a candidate while waiting for it is the sooner answer.
    A pinned ``home`` worker (prompt_cache_key) is taken over any worker reusing no more
    of the prompt than it does (when no worker holds a prefix, too), unless it is hot; a worker
    holding a longer prefix still wins (a soft home only wins near-ties). Choices
    within the near-tie window (``near_tie_ratio``, ``near_tie_s``) of the best score are ranked
    with a random handicap fixed by ``request_key``; exact ties then go to the longest reuse, the
    home worker, a rotation by ``request_key``.

    A request that opens a session (no worker holds its own content, past the shared opening) is
    also charged ``session_weight`` x the share of each worker's prefill capacity that new content
    took lately (:func:`.charges.session_charge`): sessions bring their follow-ups back to where they start.

    Blocking: every choice is also charged for the waiting its prefill imposes on the requests that
    come for the worker's cache while it runs (:func:`.charges.block_charge`, ``draw_weight``; fading as the
    caches fill): a long new prompt is placed where few requests need the cache, not on the holder
    of a popular prefix.

    Full caches: as the candidates' GPU tiers fill past ``full_cache_threshold``, the compute weight
    grows by up to ``full_cache_weight`` and the session charge and copy demand fade out
    (:func:`.charges.choice_weights`): there a copy evicts content that later prompts would have reused.

    KV sources: while workers fetch (:func:`.cost.fetches`), a worker lacking what the longest
    holder holds is estimated to fetch it from that holder rather than compute it
    (:meth:`_source_tokens`), as the router will name that holder (:mod:`.kv_source`): a move costs
    the fetch's seconds, plus the room its copy takes in full caches.
    """

    config: RoutingConfig = field(default_factory=RoutingConfig)
    name: str = "kvgate"
    warms_up: ClassVar[bool] = True  # the router plans warm-ups of hot openings for it (``warm_demand``)
    fetches_kv: ClassVar[bool] = True  # the router names KV sources for its moves (``kv_fetch_min_tokens``)

    def choose(self, request: RouteRequest) -> RouteDecision:
        held = self._source_chunks(m.tiers for c in request.candidates if (m := c.match) is not None)
        source = self._source_tokens(request, held)
        estimates = self._estimates(request, 0, source)
        most = max(e.reused_tokens for e in estimates)
        shared = self._shared_tokens(request, most)
        if shared:
            estimates = self._estimates(request, shared, source)
        holders = sum(e.reused_tokens >= shared for e in estimates)
        full = self._fullness(request)
        weights = choice_weights(self.config, request, holders, full)
        # candidates and estimates share their order: position i is the rotation's and jitter's input
        allowed = {e.worker_id for e in self._not_hot(estimates)}
        charge, block = (
            session_charge(self.config, request, most, full),
            block_charge(self.config, request, full),
        )
        scored = [
            (i, e.score(*weights) + charge(i) + block(i, e.work_s), e.reused_tokens)
            for i, e in enumerate(estimates)
            if e.worker_id in allowed
        ]
        home = next((e for e in estimates if e.worker_id == request.home and e.worker_id in allowed), None)
        cool = any(e.reused_tokens == most and e.worker_id in allowed for e in estimates)
        return self._decide(estimates[self._pick(scored, request)], home, request, (most, cool), weights)

    def _estimates(self, request: RouteRequest, shared: int, source: int) -> list[Estimate]:
        config, prompt, size = self.config, request.prompt_tokens, request.chunk_size
        return [estimate(c, prompt, size, config, shared, source) for c in request.candidates]

    @staticmethod
    def _source_chunks(tiers: Iterable[str]) -> int:
        """The longest run of a prompt's leading chunks that one worker holds now (either tier,
        pending chunks not counted): what a KV source offers (:func:`.kv_source.kv_source`)."""
        return max(map(held_chunks, tiers), default=0)

    def _source_tokens(self, request: RouteRequest | GroupedRequest, chunks: int) -> int:
        """The prompt tokens a KV source would give the chosen worker to fetch (``chunks``: the
        longest run held, :meth:`_source_chunks`): none while workers do not fetch
        (:func:`.cost.fetches`), so a move is priced as recomputing what it lacks."""
        return min(chunks * request.chunk_size, request.prompt_tokens) if fetches(self.config) else 0

    @staticmethod
    def _shared_tokens(request: RouteRequest | GroupedRequest, most: int) -> int:
        """The part of the request's shared opening that some worker holds (``most``: the longest
        reuse any offers): what a choice of another worker copies."""
        return min(request.shared.tokens, most) if request.shared is not None else 0

    def _fullness(self, request: RouteRequest | GroupedRequest) -> float:
        """How full the candidates' GPU tiers are past ``full_cache_threshold`` (0 to 1): from the
        request's ``occupancy`` where the caller gives it, else from the candidates (O(n))."""
        occupied = request.occupancy if request.occupancy is not None else occupancy(request.candidates)
        return fullness(occupied, self.config)

    def queue_s(self, candidate: Candidate) -> float:
        """The queue part of a candidate's estimate (what :class:`GroupedRequest` carries)."""
        return queue_seconds(candidate, self.config)

    def choose_grouped(self, request: GroupedRequest) -> RouteDecision:
        """:meth:`choose`'s decision from cohorts. Within a cohort the estimates differ only by
        queue: one estimate per cohort gives every member's score by the same arithmetic, so only
        members within the near-tie window are scored, and only the winner's estimate is built.
        O(workers) float comparisons, O(cohorts) estimates."""
        queue_s = request.queue_s
        groups: list[tuple[list[int], str]] = []
        held: set[int] = set()
        for cohort in request.cohorts:
            members = [request.position[w] for w in cohort.workers if w in request.position]
            held.update(members)
            groups.append((members, cohort.tiers))
        rest = [i for i in range(len(queue_s)) if i not in held] if held else list(range(len(queue_s)))
        groups.append((rest, ""))
        source = self._source_tokens(request, self._source_chunks(t for members, t in groups if members))
        guarded = self._guarded(request, groups, source)
        held_by, reuse = self._reuse_of_groups(request, groups, guarded)
        shared = self._shared_tokens(request, held_by[0])
        holders = sum(len(members) for r, members in reuse if r >= shared) if shared else len(queue_s)
        full = self._fullness(request)
        weights = choice_weights(self.config, request, holders, full)
        leads: list[_Lead] = []
        for (_, tiers), allowed in zip(groups, guarded, strict=True):
            if allowed:
                lead = self._estimate(request, allowed[0], tiers, shared, source)
                part = lead.work_s  # as Estimate.score adds it up, to the last bit
                cost = lead.compute_cost(*weights)
                leads.append(
                    (allowed, tiers, part, cost, min(map(queue_s.__getitem__, allowed)), lead.reused_tokens)
                )
        charge = session_charge(self.config, request, held_by[0], full)
        scored, tiers_at = self._near_members(
            request, leads, charge, block_charge(self.config, request, full)
        )
        chosen = self._pick(scored, request)
        home = None
        cleared = {i for allowed in guarded for i in allowed}
        if (i := request.position.get(request.home)) is not None and i in cleared:  # type: ignore[arg-type]
            tiers = next((c.tiers for c in request.cohorts if request.home in c.workers), "")
            home = self._estimate(request, i, tiers, shared, source)
        chosen_estimate = self._estimate(request, chosen, tiers_at[chosen], shared, source)
        return self._decide(chosen_estimate, home, request, held_by, weights)

    def _near_members(
        self, request: GroupedRequest, leads: list[_Lead], charge: Charge, block: Block
    ) -> tuple[list[tuple[int, float, int]], dict[int, str]]:
        """(position, score, reuse) of the allowed members that may fall within the near-tie
        window, scored as :meth:`choose` scores them, and each one's tiers. Without a session
        charge a member's score is its queue plus its cohort's part plus a blocking charge of 0 or
        more (:func:`.charges.block_charge`): one member's full score bounds the best from above, so each
        cohort's members whose queue alone puts them past that bound's window are skipped; with a
        session charge every allowed member is scored (O(workers))."""
        queue_s = request.queue_s
        scored: list[tuple[int, float, int]] = []
        tiers_at: dict[int, str] = {}
        if charge is not no_charge:
            for allowed, tiers, part, cost, _, reused in leads:
                scored += [
                    (i, (part + queue_s[i]) + cost + charge(i) + block(i, part), reused) for i in allowed
                ]
                tiers_at.update(dict.fromkeys(allowed, tiers))
            return scored, tiers_at
        allowed, _, part, cost, _, _ = min(leads, key=lambda lead: (lead[2] + lead[4]) + lead[3])
        first = min(allowed, key=queue_s.__getitem__)
        bound = (part + queue_s[first]) + cost + block(first, part)  # the best score is no higher
        reach = bound + self._window(bound) + 1e-6  # slack for float rounding; _pick tests exactly
        for allowed, tiers, part, cost, q_min, reused in leads:
            top = q_min + (reach - ((part + q_min) + cost))
            near = [i for i in allowed if queue_s[i] <= top]
            scored += [(i, (part + queue_s[i]) + cost + block(i, part), reused) for i in near]
            tiers_at.update(dict.fromkeys(near, tiers))
        return scored, tiers_at

    def _guarded(
        self, request: GroupedRequest, groups: list[tuple[list[int], str]], source: int
    ) -> list[list[int]]:
        """Each group's members that the hot-spot guard leaves, as :meth:`_not_hot` does: the cool
        ones, and hot ones whose TTFT is no later than the soonest a cool worker offers."""
        queue_s = request.queue_s
        limit = self._hot_limit(queue_s)
        parts = [self._part(request, m[0], tiers, source) if m else 0.0 for m, tiers in groups]
        cool = [part + queue_s[i] for part, (members, _) in zip(parts, groups, strict=True)
                for i in members if queue_s[i] <= limit]  # fmt: skip
        if not cool:
            return [members for members, _ in groups]
        soonest = min(cool)
        return [
            [i for i in members if queue_s[i] <= limit or part + queue_s[i] <= soonest]
            for part, (members, _) in zip(parts, groups, strict=True)
        ]

    def _part(self, request: GroupedRequest, i: int, tiers: str, source: int) -> float:
        """Prefill, swap-in and fetch seconds of candidate ``i`` (a cohort's members share them),
        added as :attr:`Estimate.ttft_s` adds them, to the last bit."""
        return self._estimate(request, i, tiers, 0, source).work_s

    def _reuse_of_groups(
        self, request: GroupedRequest, groups: list[tuple[list[int], str]], guarded: list[list[int]]
    ) -> tuple[tuple[int, bool], list[tuple[int, list[int]]]]:
        """(the longest reuse any candidate offers, whether a worker offering it passed the guard),
        and (reuse, members) of every group that holds some of the prompt."""
        reuse = [
            (self._estimate(request, members[0], tiers).reused_tokens, members, allowed)
            for (members, tiers), allowed in zip(groups, guarded, strict=True)
            if members and tiers
        ]
        most = max((r for r, _, _ in reuse), default=0)
        cool = any(r == most and allowed for r, _, allowed in reuse)
        return (most, cool or most == 0), [(r, members) for r, members, _ in reuse]

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
        weights: tuple[float, float, float],
    ) -> RouteDecision:
        """``chosen``, unless the pinned home worker (``home``: a prompt_cache_key's, None when
        absent or hot) reuses as many tokens: the key decides between equally cached workers, never
        against a longer prefix (docs/CACHING.md, "prompt_cache_key"). ``held``: the longest reuse any
        candidate offers, and whether a worker offering it was allowed (not a hot spot); ``weights``:
        the compute and the copy weight. The reason is ``pinned`` when the key decided: the home
        offers the longest reuse there is and nothing was cached or the policy would have chosen
        another worker; a home that reuses less than a skipped holder is the load's choice."""
        if home is not None and request.home_pinned and home.reused_tokens >= chosen.reused_tokens:
            if home.reused_tokens >= held[0] and (held[0] == 0 or home.worker_id != chosen.worker_id):
                return _decision(home, RouteReason.PINNED, request)
            chosen = home
        copied = chosen.copy_s + chosen.fetch_copy_s > 0 and weights[1] < weights[0]  # copied as it pays
        return _decision(chosen, _reason(chosen.reused_tokens, *held, copied), request)

    def _window(self, best_score: float) -> float:
        return self.config.near_tie_ratio * best_score + self.config.near_tie_s

    def _estimate(
        self, request: GroupedRequest, i: int, tiers: str, shared: int = 0, source: int = 0
    ) -> Estimate:
        candidate = request.candidates[i]
        match = PrefixMatch(candidate.worker_id, tiers) if tiers else None
        prompt, size = request.prompt_tokens, request.chunk_size
        return estimate(replace(candidate, match=match), prompt, size, self.config, shared, source)

    def _hot_limit(self, queue_s: Sequence[float]) -> float:
        return hot_limit(queue_s, self.config)

    def _not_hot(self, estimates: list[Estimate]) -> list[Estimate]:
        """The candidates the guard leaves: every cool worker, and a hot one only while its TTFT
        is no later than the soonest a cool worker offers (it holds, or is computing, what the
        prompt needs: waiting for it is sooner than recomputing elsewhere)."""
        limit = self._hot_limit([e.queue_s for e in estimates])
        cool = [e for e in estimates if e.queue_s <= limit]
        if not cool:
            return estimates
        soonest = min(e.ttft_s for e in cool)
        return [e for e in estimates if e.queue_s <= limit or e.ttft_s <= soonest]

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


def _reason(reused: int, most: int, holder_allowed: bool, copied: bool = False) -> RouteReason:
    """Why a choice reusing ``reused`` tokens was made when the best any worker offers is ``most``
    (``copied``: the choice copies a shared opening whose demand paid for the copy)."""
    if most == 0:
        return RouteReason.NEW_PREFIX
    if reused >= most:
        return RouteReason.CACHE_HIT
    return RouteReason.LOAD_OVERRIDE if holder_allowed and not copied else RouteReason.HOT_PREFIX


def _decision(e: Estimate, reason: RouteReason, request: RouteRequest | GroupedRequest) -> RouteDecision:
    return RouteDecision(
        worker_id=e.worker_id,
        reason=reason,
        predicted_cached_tokens=e.reused_tokens,
        matched_chunks=-(-e.reused_tokens // request.chunk_size),
        estimated_ttft_s=e.ttft_s,
    )
