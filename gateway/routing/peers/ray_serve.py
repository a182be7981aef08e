"""Ray Serve's ``PrefixCacheAffinityRouter`` (Ray Serve LLM; ``PrefixAwarePow2ReplicaRouter``).

Per request: if the replicas' queue lengths differ by more than ``imbalanced_threshold``, power of
two choices (two replicas drawn at random, the shorter queue). Otherwise the prompt is matched
against one prefix tree shared by every router: if the best match rate (matched / prompt length)
reaches ``match_rate_threshold``, the replicas with that longest match are the choices; below it,
the replicas with the smallest trees. Among the choices, the shortest queue (ties drawn at random).
The prompt is inserted into the chosen replica's tree once routed. Eviction is off by default
(``do_eviction``); when on, every ``eviction_interval_secs`` a tree over ``eviction_threshold_chars``
shrinks to ``eviction_target_chars``. Queue length is the replica's ongoing requests.

Defaults from Ray Serve's documentation and ``initialize_state``: threshold 10 requests, match rate
0.1, no eviction (400,000 / 360,000 characters and 10 s when enabled; counted here at 4 characters
per token). The tree holds characters; here chunks of ``chunk_size`` tokens.
"""

from __future__ import annotations

from dataclasses import dataclass

from kvgate.gateway.routing.baselines import decide, requests_on
from kvgate.gateway.routing.config import RoutingConfig
from kvgate.gateway.routing.jitter import unit
from kvgate.gateway.routing.peers.routed_tree import RoutedTree
from kvgate.gateway.routing.peers.sglang import CHARS_PER_TOKEN
from kvgate.gateway.routing.types import Candidate, RouteDecision, RouteReason, RouteRequest
from kvgate.proto.ids import ChunkHash, WorkerId
from kvgate.proto.layout import DEFAULT_CHUNK_SIZE


@dataclass(frozen=True, slots=True)
class RayServeParams:
    imbalanced_threshold: int = 10
    match_rate_threshold: float = 0.1
    do_eviction: bool = False
    eviction_threshold_chars: int = 400_000
    eviction_target_chars: int = 360_000
    eviction_interval_s: float = 10.0


class RayServePrefixAffinity:
    """Mutable (its tree); Ray Serve's tree is one detached actor shared by all routers."""

    def __init__(self, config: RoutingConfig | None = None, params: RayServeParams | None = None) -> None:
        self.config = config or RoutingConfig()
        self.params = params or RayServeParams()
        self.name = "ray_serve_prefix"
        self._tree = RoutedTree()
        self._evicted_ms: int | None = None

    def choose(self, request: RouteRequest) -> RouteDecision:
        queues = [requests_on(c) for c in request.candidates]
        if max(queues) - min(queues) > self.params.imbalanced_threshold:
            return decide(_power_of_two(request), request, RouteReason.LOAD_BALANCED)
        runs = self._tree.matches(request.chunks)
        longest = max((runs.get(c.worker_id, 0) for c in request.candidates), default=0)
        rate = min(longest * request.chunk_size, request.prompt_tokens) / max(request.prompt_tokens, 1)
        if longest and rate >= self.params.match_rate_threshold:
            choices = [c for c in request.candidates if runs.get(c.worker_id, 0) == longest]
            return decide(_shortest(choices, request), request, RouteReason.CACHE_HIT)
        smallest = min(self._tree.size(c.worker_id) for c in request.candidates)
        choices = [c for c in request.candidates if self._tree.size(c.worker_id) == smallest]
        return decide(_shortest(choices, request), request, RouteReason.LOAD_BALANCED)

    def learn(self, chunks: tuple[ChunkHash, ...], worker_id: WorkerId, now_ms: int) -> None:
        self._tree.insert(chunks, worker_id)
        p = self.params
        if not p.do_eviction:
            return
        if self._evicted_ms is None or now_ms - self._evicted_ms >= p.eviction_interval_s * 1000:
            self._evicted_ms = now_ms
            chars = CHARS_PER_TOKEN * DEFAULT_CHUNK_SIZE  # per chunk
            self._tree.evict_to(p.eviction_target_chars // chars, p.eviction_threshold_chars // chars)


def _shortest(choices: list[Candidate], request: RouteRequest) -> Candidate:
    """The choice with the shortest queue; ties drawn by the request's key."""
    ranked = [(requests_on(c), unit(request.request_key, i), c) for i, c in enumerate(choices)]
    return min(ranked, key=lambda r: r[:2])[2]


def _power_of_two(request: RouteRequest) -> Candidate:
    """Two candidates drawn by the request's key; the shorter queue of the two."""
    n = len(request.candidates)
    first = int(unit(request.request_key, 0) * n)
    second = (first + 1 + int(unit(request.request_key, 1) * max(n - 1, 1))) % n
    pair = [request.candidates[first], request.candidates[second]]
    return min(pair, key=requests_on)
