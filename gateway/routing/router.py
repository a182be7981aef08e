"""The gateway's routing step: index lookup, policy, pending entries, in-flight accounting.

The policies are pure; this is the stateful shell around them (one per gateway process, owned by
the composition root). It never blocks: the index calls are bounded by the index's own timeout,
and when the index is unavailable the request is routed by load alone (reason FALLBACK).
"""

from __future__ import annotations

import contextlib
import itertools
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from kvgate.gateway.routing.home import home_worker
from kvgate.gateway.routing.local_pending import LocalPending
from kvgate.gateway.routing.types import Candidate, RouteDecision, RouteReason, RouteRequest, RoutingPolicy
from kvgate.index.base import PrefixIndex
from kvgate.index.types import IndexUnavailableError, LookupResult, WorkerStatus
from kvgate.proto.ids import ChunkHash, WorkerId


@dataclass(frozen=True, slots=True)
class Routed:
    """A decision with what it was based on; ``lookup`` is None in fallback (degraded) mode."""

    decision: RouteDecision
    lookup: LookupResult | None
    num_chunks: int

    @property
    def degraded(self) -> bool:
        return self.lookup is None


class Router:
    """Routes requests; remembers the uncached prompt tokens it sent to each worker until
    :meth:`prefill_done`, so a burst between two heartbeats is not all sent to one "idle" worker."""

    def __init__(
        self,
        index: PrefixIndex,
        policy: RoutingPolicy,
        fallback: RoutingPolicy,
        chunk_size: int,
        pending_ttl_s: float,
    ) -> None:
        self._index = index
        self._local = LocalPending(pending_ttl_s)
        self._policy = policy
        self._fallback = fallback
        self._chunk_size = chunk_size
        self._seq = itertools.count()
        self._inflight: Counter[WorkerId] = Counter()

    async def route(
        self,
        hashes: Sequence[ChunkHash],
        prompt_tokens: int,
        workers: Sequence[WorkerStatus],
        request_key: int,
        cache_key: str | None = None,
    ) -> Routed:
        """Chooses a worker among ``workers`` (non-empty) and records the choice: pending entries
        in the index for the prompt's chunks, and the in-flight tokens. Mutates this router."""
        routed = await self.preview(hashes, prompt_tokens, workers, request_key, cache_key)
        decision = routed.decision
        self._inflight[decision.worker_id] += prompt_tokens - decision.predicted_cached_tokens
        self._local.record(hashes, decision.worker_id)
        await self._mark_pending(hashes, decision.worker_id, not routed.degraded)
        return routed

    async def preview(
        self,
        hashes: Sequence[ChunkHash],
        prompt_tokens: int,
        workers: Sequence[WorkerStatus],
        request_key: int,
        cache_key: str | None = None,
    ) -> Routed:
        """The decision :meth:`route` would make now, recording nothing (the dry-run view)."""
        lookup = await self._lookup(hashes)
        # From here to the end of route()'s bookkeeping there is no await: concurrent requests
        # see each other's decisions through the local record.
        if lookup is not None:
            lookup = self._local.merge(lookup, hashes)
        request = self._request(prompt_tokens, workers, lookup, request_key, cache_key)
        if lookup is None:
            return Routed(_as_fallback(self._fallback.choose(request)), None, len(hashes))
        return Routed(self._policy.choose(request), lookup, len(hashes))

    def prefill_done(self, decision: RouteDecision, prompt_tokens: int) -> None:
        """The request's prefill finished (or the request failed): its tokens stop counting as in
        flight. Call exactly once per routed request, with the values :meth:`route` used."""
        worker = decision.worker_id
        self._inflight[worker] -= prompt_tokens - decision.predicted_cached_tokens
        if self._inflight[worker] <= 0:
            del self._inflight[worker]

    def inflight_tokens(self, worker_id: WorkerId) -> int:
        return self._inflight[worker_id]

    async def _lookup(self, hashes: Sequence[ChunkHash]) -> LookupResult | None:
        try:
            return await self._index.lookup(hashes)
        except IndexUnavailableError:
            return None

    async def _mark_pending(self, hashes: Sequence[ChunkHash], worker_id: WorkerId, index_up: bool) -> None:
        if not (index_up and hashes):
            return
        with contextlib.suppress(IndexUnavailableError):  # a lost hint costs a scattered burst at most
            await self._index.add_pending(hashes, worker_id)

    def _request(
        self,
        prompt_tokens: int,
        workers: Sequence[WorkerStatus],
        lookup: LookupResult | None,
        request_key: int,
        cache_key: str | None,
    ) -> RouteRequest:
        matches = lookup.matches if lookup is not None else {}
        ids = sorted(w.info.worker_id for w in workers)
        by_id = {w.info.worker_id: w for w in workers}
        candidates = tuple(
            Candidate(wid, by_id[wid].load, matches.get(wid), self._inflight[wid]) for wid in ids
        )
        home = home_worker(cache_key, ids) if cache_key else None
        return RouteRequest(prompt_tokens, self._chunk_size, candidates, next(self._seq), request_key, home)


def _as_fallback(decision: RouteDecision) -> RouteDecision:
    return RouteDecision(decision.worker_id, RouteReason.FALLBACK, 0, 0, decision.estimated_ttft_s)
