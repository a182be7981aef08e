"""Dynamo's KV router (``--router-mode kv``).

Each worker's cost, in KV blocks: ``overlap_score_weight`` x prefill blocks + decode blocks, where
prefill blocks are the worker's active prompt work plus this prompt's tokens not already stored
there (overlap from the workers' KV events), and decode blocks are the KV blocks of its active
sequences plus this request's. The lowest cost wins (temperature 0, ties drawn at random); with a
temperature above 0, a worker is drawn with probability softmax(-normalised cost / temperature).

Defaults from Dynamo's router documentation: overlap weight 1.0, temperature 0.0. The router
tracks active blocks from its own decisions; here the worker's last load report plus what this
gateway routed since (the same figures, one report later). Blocks are the engine's
(``DEFAULT_BLOCK_SIZE`` tokens).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from kvgate.gateway.routing.baselines import decide
from kvgate.gateway.routing.config import RoutingConfig
from kvgate.gateway.routing.jitter import unit
from kvgate.gateway.routing.peers.stored import stored_chunks
from kvgate.gateway.routing.types import Candidate, RouteDecision, RouteReason, RouteRequest
from kvgate.proto.layout import DEFAULT_BLOCK_SIZE


@dataclass(frozen=True, slots=True)
class DynamoParams:
    overlap_score_weight: float = 1.0
    temperature: float = 0.0


@dataclass(frozen=True)
class DynamoKv:
    config: RoutingConfig = field(default_factory=RoutingConfig)
    params: DynamoParams = field(default_factory=DynamoParams)
    name: str = "dynamo_kv"

    def choose(self, request: RouteRequest) -> RouteDecision:
        costs = [self.cost(c, request) for c in request.candidates]
        pick = _draw(costs, request.request_key, self.params.temperature)
        chosen = request.candidates[pick]
        reason = RouteReason.CACHE_HIT if stored_chunks(chosen) else RouteReason.LOAD_BALANCED
        return decide(chosen, request, reason)

    def cost(self, candidate: Candidate, request: RouteRequest) -> float:
        """``overlap_score_weight`` x prefill blocks + decode blocks of sending ``request`` there."""
        load = candidate.load
        cached = min(stored_chunks(candidate) * request.chunk_size, request.prompt_tokens)
        prefill = load.waiting_prefill_tokens + candidate.inflight_tokens + request.prompt_tokens - cached
        active = (load.gpu_blocks_total - load.gpu_blocks_free) * DEFAULT_BLOCK_SIZE
        decode = active + request.prompt_tokens
        return (self.params.overlap_score_weight * prefill + decode) / DEFAULT_BLOCK_SIZE


def _draw(costs: list[float], key: int, temperature: float) -> int:
    """The lowest cost (ties drawn by ``key``) at temperature 0, else a softmax draw."""
    if temperature <= 0:
        low = min(costs)
        tied = [i for i, c in enumerate(costs) if c == low]
        return tied[int(unit(key, 0) * len(tied))]
    lo, hi = min(costs), max(costs)
    spread = hi - lo or 1.0
    weights = [math.exp(-(c - lo) / spread / temperature) for c in costs]
    target = unit(key, 0) * sum(weights)
    for i, w in enumerate(weights):
        target -= w
        if target < 0:
            return i
    return len(costs) - 1
