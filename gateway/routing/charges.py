"""What the kvgate policy charges a choice beyond its TTFT: the weights of the compute it adds, a
new session's share of a worker's recent intake, and the waiting a long prefill imposes on the
requests that come for the worker's cache. Pure functions of the routing config and the request."""

from __future__ import annotations

from collections.abc import Callable

from kvgate.gateway.routing.config import RoutingConfig
from kvgate.gateway.routing.types import GroupedRequest, RouteRequest

Charge = Callable[[int], float]
"""Seconds charged to candidate ``i`` (a position in ``request.candidates``)."""

Block = Callable[[int, float], float]
"""Seconds charged to candidate ``i`` for ``part_s`` seconds of prefill and swap-in there."""


def no_charge(_i: int) -> float:
    return 0.0


def no_block(_i: int, _part_s: float) -> float:
    return 0.0


def choice_weights(
    config: RoutingConfig, request: RouteRequest | GroupedRequest, holders: int, full: float
) -> tuple[float, float, float]:
    """The compute weight, the weight of copying the shared opening to one more worker, and the
    room weight (:meth:`.cost.Estimate.compute_cost`).

    The compute weight is ``compute_weight``, plus ``full_cache_weight`` x ``full`` (how far
    the candidates' GPU tiers are past ``full_cache_threshold``, :func:`.cost.fullness`): a
    copy into a full cache evicts content that later prompts would have reused. That part is
    the room weight: a fetched token takes the room a computed one does, however fast it came.
    A copy serves the receiving worker's share of the opening's future requests (as many as
    went through it lately, times the opening's footprint ``worth`` and the room left, 1 -
    ``full``, over ``holders`` + 1 holders), so its weight is spread over them."""
    room = config.full_cache_weight * full
    weight = config.compute_weight + room
    shared = request.shared
    uses = shared.uses * shared.worth * (1 - full) if shared is not None else 0.0
    return weight, weight / (1 + config.copy_amortisation * uses / (holders + 1)), room


def session_charge(
    config: RoutingConfig, request: RouteRequest | GroupedRequest, most: int, full: float
) -> Charge:
    """Seconds charged to candidate ``i`` (a position in ``request.candidates``) when the
    request opens a session (``most``, the longest reuse any worker offers, covers no more than
    its shared opening): ``session_weight`` x the share of the worker's prefill capacity that new
    content took lately, above the least any candidate took (so the charge moves choices, not
    the near-tie window), times the shared opening's ``worth`` (moving a session copies the
    opening: one that fills much of a cache evicts more than spreading gains), times the room
    the caches have (1 - ``full``, :func:`.cost.fullness`: a copy into a full cache evicts what
    later prompts would reuse). :func:`no_charge` otherwise (a follow-up, a caller that keeps
    no intake record). O(candidates) when charged."""
    shared = request.shared
    opening, worth = (shared.tokens, shared.worth) if shared is not None else (0, 1.0)
    weight, intake = config.session_weight * worth * (1 - full), request.intake
    if not weight or intake is None or most > opening:
        return no_charge
    rates = [intake(c.worker_id) for c in request.candidates]
    least, per_token = min(rates), weight / config.prefill_tokens_per_s
    return [per_token * (rate - least) for rate in rates].__getitem__


def block_charge(config: RoutingConfig, request: RouteRequest | GroupedRequest, full: float) -> Block:
    """Seconds charged to candidate ``i`` (a position in ``request.candidates``) for a prefill
    and swap-in of ``part_s`` seconds there: ``draw_weight`` x the requests per second that came
    for its cache lately (``request.draw``) x ``part_s``^2 / 2 -- the waiting that the prefill
    imposes on the requests arriving for the worker's cache while it runs (on average each
    waits half of it), x the room the caches have (1 - ``full``, :func:`.cost.fullness`: in full
    caches the charge would crowd new content onto a few that then churn). Negligible for a
    short prefill; a long one (a new document, a long new prompt) goes where few requests come
    for the cache. :func:`no_block` without a draw record or weight."""
    weight, draw = config.draw_weight / 2 * (1 - full), request.draw
    if not weight or draw is None:
        return no_block
    candidates = request.candidates
    return lambda i, part_s: weight * draw(candidates[i].worker_id) * part_s * part_s
