"""Why a request reused a different number of cached tokens than the router predicted.

A prediction can only fall short of what the worker can reuse at all: whole KV blocks, never the
prompt's last token (the worker computes it for its logits). Below that, the shortfall has one cause,
the one of the **first missing chunk** (reuse stops there, so everything after it is lost with it):

- ``evicted_since_lookup``: the worker held that chunk when the request arrived and evicted it before
  admitting the request (it says so in ``Usage.evicted_predicted_tokens``; it cannot see the few
  milliseconds between the gateway's lookup and the request's arrival, which count as stale below);
- ``pending_not_ready``: the index only had a pending hint for it (another request routed there with
  the same prefix) and that request had not computed it yet;
- ``stale_index``: otherwise: the index claimed a chunk the worker did not hold when the request
  arrived (its eviction event had not reached the index yet, or the worker never held it).

A worker that reuses at least a chunk more than predicted held chunks the index did not know of:
``unknown_to_index`` -- unless the decision named a KV source, whose tokens the worker was to fetch:
reusing up to those is the prediction held, and reusing fewer (its own part held) is
``kv_fetch_short`` (the fetch failed or the source no longer held them all). Routing a request away
from its longest match is counted when it is routed
(``routed_elsewhere_for_load``, see :meth:`GatewayMetrics.routed`).
"""

from __future__ import annotations

from kvgate.gateway.routing.types import Routed
from kvgate.proto.ids import Tier
from kvgate.proto.layout import reusable_tokens
from kvgate.proto.sampling import Usage
from kvgate.proto.units import TokenCount

EVICTED = "evicted_since_lookup"
PENDING = "pending_not_ready"
STALE = "stale_index"
UNKNOWN = "unknown_to_index"
FETCH_SHORT = "kv_fetch_short"
ROUTED_AWAY = "routed_elsewhere_for_load"
CAUSES = (ROUTED_AWAY, EVICTED, PENDING, STALE, UNKNOWN, FETCH_SHORT)


def misprediction(
    routed: Routed, usage: Usage, chunk_size: int, block_size: int
) -> tuple[str, TokenCount] | None:
    """The cause and the tokens of ``routed``'s misprediction given the worker's ``usage``; None when
    the prediction held (pure)."""
    reusable = reusable_tokens(usage.prompt_tokens, block_size)
    predicted = min(routed.decision.predicted_cached_tokens, reusable)
    fetched = min(routed.source.tokens, reusable) if routed.source is not None else 0
    shortfall = TokenCount(predicted - usage.cached_tokens)
    if shortfall > 0:
        if usage.evicted_predicted_tokens > 0:
            return EVICTED, shortfall
        pending = _first_missing_tier(routed, usage, chunk_size) == Tier.PENDING
        return (PENDING if pending else STALE), shortfall
    if fetched > usage.cached_tokens:
        return FETCH_SHORT, TokenCount(fetched - usage.cached_tokens)
    surplus = usage.cached_tokens - max(predicted, fetched)
    if surplus >= chunk_size:
        return UNKNOWN, TokenCount(surplus)
    return None


def _first_missing_tier(routed: Routed, usage: Usage, chunk_size: int) -> Tier | None:
    if routed.lookup is None:
        return None
    match = routed.lookup.matches.get(routed.decision.worker_id)
    index = usage.cached_tokens // chunk_size
    return Tier(match.tiers[index]) if match is not None and index < len(match.tiers) else None
