"""SGLang's cache-aware router (``sglang_router``/SGLang Model Gateway, policy ``cache_aware``, HTTP
mode: the approximate tree).

Per request: if the fleet is imbalanced -- (max - min) load > ``balance_abs_threshold`` and max load
> ``balance_rel_threshold`` x min -- the least loaded worker. Otherwise the worker whose tree matches
the longest prefix of the prompt, if that match covers more than ``cache_threshold`` of it; else the
worker with the smallest tree ("most cache capacity"). The prompt is then inserted into the chosen
worker's tree. A background task trims each worker's tree to ``max_tree_size`` every
``eviction_interval_secs`` (LRU leaves first). Load is the router's count of requests in flight on a
worker; here the worker's running + queued requests, which is the same count one load report later.

Defaults are the SGLang Model Gateway's command-line defaults (what a deployment started from
the command line runs with): cache threshold 0.3, balance thresholds 64 and 1.5, eviction every
120 s, trees of 2^26 characters (counted here at 4 characters per token). The library's own
``CacheAwareConfig`` defaults differ (0.5, 32, 1.1, 30 s, 10,000), as did older router releases.
The tree holds text characters; here chunks of ``chunk_size`` tokens, the granularity every policy
in the simulator sees.
"""

from __future__ import annotations

from dataclasses import dataclass

from kvgate.gateway.routing.baselines import decide, requests_on
from kvgate.gateway.routing.config import RoutingConfig
from kvgate.gateway.routing.peers.routed_tree import RoutedTree
from kvgate.gateway.routing.types import RouteDecision, RouteReason, RouteRequest
from kvgate.proto.ids import ChunkHash, WorkerId
from kvgate.proto.layout import DEFAULT_CHUNK_SIZE

CHARS_PER_TOKEN = 4


@dataclass(frozen=True, slots=True)
class SGLangParams:
    cache_threshold: float = 0.3
    balance_abs_threshold: int = 64
    balance_rel_threshold: float = 1.5
    eviction_interval_s: float = 120.0
    max_tree_chars: int = 1 << 26


class SGLangCacheAware:
    """Mutable (its tree); one per gateway, as each SGLang router keeps its own."""

    def __init__(self, config: RoutingConfig | None = None, params: SGLangParams | None = None) -> None:
        self.config = config or RoutingConfig()
        self.params = params or SGLangParams()
        self.name = "sglang_cache_aware"
        self._tree = RoutedTree()
        self._evicted_ms: int | None = None

    def choose(self, request: RouteRequest) -> RouteDecision:
        loads = [requests_on(c) for c in request.candidates]
        lo, hi = min(loads), max(loads)
        p = self.params
        if hi - lo > p.balance_abs_threshold and hi > p.balance_rel_threshold * lo:
            return decide(min(request.candidates, key=requests_on), request, RouteReason.LOAD_BALANCED)
        runs = self._tree.matches(request.chunks)
        best = max(request.candidates, key=lambda c: runs.get(c.worker_id, 0))
        matched = min(runs.get(best.worker_id, 0) * request.chunk_size, request.prompt_tokens)
        if matched > p.cache_threshold * request.prompt_tokens:
            return decide(best, request, RouteReason.CACHE_HIT)
        smallest = min(request.candidates, key=lambda c: self._tree.size(c.worker_id))
        return decide(smallest, request, RouteReason.LOAD_BALANCED)

    def learn(self, chunks: tuple[ChunkHash, ...], worker_id: WorkerId, now_ms: int) -> None:
        self._tree.insert(chunks, worker_id)
        if self._evicted_ms is None:
            self._evicted_ms = now_ms
        elif now_ms - self._evicted_ms >= self.params.eviction_interval_s * 1000:
            self._evicted_ms = now_ms
            self._tree.evict_to(self.params.max_tree_chars // (CHARS_PER_TOKEN * DEFAULT_CHUNK_SIZE))
