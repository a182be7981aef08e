"""Baseline policies, for benchmarks and as fallbacks: they ignore the cache entirely."""

from __future__ import annotations

from dataclasses import dataclass, field

from kvgate.gateway.routing.config import RoutingConfig
from kvgate.gateway.routing.cost import queue_seconds
from kvgate.gateway.routing.types import Candidate, RouteDecision, RouteReason, RouteRequest


def predicted_tokens(candidate: Candidate, request: RouteRequest) -> int:
    """What a cache-blind choice still gets from the cache: the chosen worker's own match."""
    return min(candidate.matched_chunks * request.chunk_size, request.prompt_tokens)


def requests_on(candidate: Candidate) -> int:
    """The load figure request-counting routers balance (SGLang's, Ray Serve's): requests on the
    worker, running or queued."""
    return candidate.load.running_seqs + candidate.load.waiting_seqs


def decide(candidate: Candidate, request: RouteRequest, reason: RouteReason) -> RouteDecision:
    return RouteDecision(
        candidate.worker_id, reason, predicted_tokens(candidate, request), candidate.matched_chunks
    )


@dataclass(frozen=True)
class RoundRobin:
    """The ``request_seq``-th candidate, cyclically."""

    config: RoutingConfig = field(default_factory=RoutingConfig)
    name: str = "round_robin"

    def choose(self, request: RouteRequest) -> RouteDecision:
        pick = request.candidates[request.request_seq % len(request.candidates)]
        return decide(pick, request, RouteReason.LOAD_BALANCED)


@dataclass(frozen=True)
class LeastLoaded:
    """The candidate with the shortest estimated queue (ties: the first by worker id)."""

    config: RoutingConfig = field(default_factory=RoutingConfig)
    name: str = "least_loaded"

    def choose(self, request: RouteRequest) -> RouteDecision:
        pick = min(request.candidates, key=lambda c: queue_seconds(c, self.config))
        return decide(pick, request, RouteReason.LOAD_BALANCED)


@dataclass(frozen=True)
class PowerOfTwo:
    """Two candidates drawn by ``request_key``; the less loaded of them."""

    config: RoutingConfig = field(default_factory=RoutingConfig)
    name: str = "power_of_two"

    def choose(self, request: RouteRequest) -> RouteDecision:
        n = len(request.candidates)
        first = request.request_key % n
        second = (first + 1 + (request.request_key >> 32) % max(n - 1, 1)) % n
        pair = [request.candidates[first], request.candidates[second]]
        pick = min(pair, key=lambda c: queue_seconds(c, self.config))
        return decide(pick, request, RouteReason.LOAD_BALANCED)


@dataclass(frozen=True)
class RandomChoice:
    """A candidate drawn by ``request_key``."""

    config: RoutingConfig = field(default_factory=RoutingConfig)
    name: str = "random"

    def choose(self, request: RouteRequest) -> RouteDecision:
        pick = request.candidates[request.request_key % len(request.candidates)]
        return decide(pick, request, RouteReason.LOAD_BALANCED)
