"""What a routing policy sees and what it decides."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol

from kvgate.index.types import PrefixMatch
from kvgate.proto.ids import WorkerId
from kvgate.proto.workers import WorkerLoad


class RouteReason(StrEnum):
    CACHE_HIT = "cache_hit"  # the chosen worker holds (or is about to hold) a prefix of the prompt
    LOAD_BALANCED = "load_balanced"  # no useful prefix, or affinity would overload a worker
    FALLBACK = "fallback"  # the index was unavailable: chosen by load alone
    PINNED = "pinned"  # prompt_cache_key sent it to the home worker of its key


@dataclass(frozen=True, slots=True)
class Candidate:
    """One live worker. ``match`` is None when it holds no prefix of the prompt;
    ``inflight_tokens`` are prompt tokens this gateway sent there that the worker's last
    heartbeat cannot show yet (so a burst between heartbeats does not pile up)."""

    worker_id: WorkerId
    load: WorkerLoad
    match: PrefixMatch | None = None
    inflight_tokens: int = 0

    @property
    def matched_chunks(self) -> int:
        return self.match.chunks if self.match else 0


@dataclass(frozen=True, slots=True)
class RouteRequest:
    """Everything a policy may look at. ``candidates`` is non-empty and sorted by worker id;
    ``request_seq`` counts requests (round-robin); ``request_key`` is 64 random-looking bits fixed
    per request (random choices stay reproducible); ``home`` is the prompt_cache_key's worker."""

    prompt_tokens: int
    chunk_size: int
    candidates: tuple[Candidate, ...]
    request_seq: int = 0
    request_key: int = 0
    home: WorkerId | None = None

    def __post_init__(self) -> None:
        if not self.candidates:
            raise ValueError("a route request needs at least one candidate worker")


@dataclass(frozen=True, slots=True)
class RouteDecision:
    """The chosen worker, why, and how many prompt tokens the policy expects to be cached there
    (the worker reports the actual number; the two together measure the router's accuracy)."""

    worker_id: WorkerId
    reason: RouteReason
    predicted_cached_tokens: int
    matched_chunks: int = 0
    estimated_ttft_s: float | None = None


class RoutingPolicy(Protocol):
    """A pure function of its request and config: same input, same decision."""

    name: str

    def choose(self, request: RouteRequest) -> RouteDecision: ...
