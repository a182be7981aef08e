"""The requests that came for each worker's cache lately: who a long prefill there keeps waiting.

A worker holding content that prompts keep coming back for (a popular document, a busy agent's
tool definitions, live conversations) is asked for it again while it computes whatever else it is
given. A long prefill placed there makes each of those requests wait for it, or pay for a copy of
the content elsewhere; placed on a worker that few requests come to, it delays few. The router
counts the requests it sent to each worker for what the worker holds (a decision that reuses
cached tokens), decayed with a half-life, and the kvgate policy charges a choice for the waiting
its prefill would cause there (``draw_weight``, :class:`.config.RoutingConfig`).
"""

from __future__ import annotations

from collections.abc import Callable

from kvgate.gateway.routing.placed import PlacedContent
from kvgate.proto.ids import WorkerId


class CacheDraw:
    """Decayed counts, per worker, of the requests routed there for its cache: a rate (requests
    per second lately, an exponentially weighted mean over the half-life's mean life). O(1) per
    call; each gateway replica counts only what it routed."""

    def __init__(self, half_life_s: float, monotonic: Callable[[], float]) -> None:
        self._counts = PlacedContent(half_life_s, monotonic)

    def record(self, worker_id: WorkerId, reused_tokens: int) -> None:
        """One request routed to ``worker_id``, expected to reuse ``reused_tokens`` there: counted
        when it reuses any (a request for the worker's cache)."""
        if reused_tokens > 0:
            self._counts.add(worker_id, 1)

    def rate(self, worker_id: WorkerId) -> float:
        """Requests per second that came for the worker's cache lately (0.0 when none did)."""
        return self._counts.rate(worker_id)

    def forget(self, worker_id: WorkerId) -> None:
        self._counts.forget(worker_id)
