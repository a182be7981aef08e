"""What a routing policy sees and what it decides."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol, runtime_checkable

from kvgate.index.types import Cohort, LookupResult, PrefixMatch
from kvgate.proto.ids import ChunkHash, WorkerId
from kvgate.proto.units import ChunkCount, TokenCount
from kvgate.proto.workers import WorkerLoad


class RouteReason(StrEnum):
    """Why a worker was chosen: the label of the decision metric, the explain view and replies."""

    CACHE_HIT = "cache_hit"  # it holds (or is about to hold) the longest prefix of the prompt held anywhere
    LOAD_OVERRIDE = "load_override"  # another worker holds more of it: the cost model chose this one
    NEW_PREFIX = "new_prefix"  # no worker holds any of it: placed by cost (load, then near-tie draw)
    HOT_PREFIX = "hot_prefix_replicated"  # holders hot, or its demand pays for a copy: copied elsewhere
    LOAD_BALANCED = "load_balanced"  # a cache-blind choice (baselines, a peer's load branch)
    FALLBACK = "fallback"  # the index was unavailable: chosen by load alone
    PINNED = "pinned"  # its prompt_cache_key chose the home among workers reusing as much (or nothing)


@dataclass(frozen=True, slots=True)
class Candidate:
    """One live worker. ``match`` is None when it holds no prefix of the prompt;
    ``inflight_tokens`` are prompt tokens this gateway sent there that the worker's last
    heartbeat cannot show yet (so a burst between heartbeats does not pile up); ``startup_s``:
    seconds before the worker can start this request at all (loading its LoRA adapter), 0 for most."""

    worker_id: WorkerId
    load: WorkerLoad
    match: PrefixMatch | None = None
    inflight_tokens: TokenCount = 0
    startup_s: float = 0.0

    @property
    def matched_chunks(self) -> ChunkCount:
        return self.match.chunks if self.match else ChunkCount(0)


@dataclass(frozen=True, slots=True)
class SharedPrefix:
    """The opening of a prompt that other prompts share (up to where the prompts the router saw
    part ways): ``tokens`` long, and ``uses`` -- how many requests went through it lately (decayed):
    a copy of it on another worker serves that worker's share of them. ``worth``: what is left of a
    copy's worth once the cache room it takes is counted (1.0 for a small opening, 0.0 for one of a
    tenth of a worker's GPU tier or more); the uses a copy serves are ``uses`` x ``worth``."""

    tokens: TokenCount
    uses: float
    worth: float = 1.0


@dataclass(frozen=True, slots=True)
class RouteRequest:
    """Everything a policy may look at. ``candidates`` is non-empty and sorted by worker id;
    ``request_seq`` counts requests (round-robin); ``request_key`` is 64 random-looking bits fixed
    per request (random choices stay reproducible); ``home`` is the prompt_cache_key's worker
    (``home_pinned``: taken over any worker reusing no more of the prompt) or a soft home (it wins
    near-ties only); ``chunks`` are the prompt's chunk hashes, for policies that keep a prefix record
    of their own (:class:`LearningPolicy`; empty where the caller has none); ``placed(worker)`` is the
    share of recent new content the worker took, relative to the most any took (0 to 1; None: not known);
    ``shared`` is the prompt's shared opening (None: not known); ``intake(worker)`` is the new content
    (uncached prompt tokens) sent to the worker lately, per second (None: not known); ``occupancy`` is
    the candidates' mean share of GPU-tier blocks holding KV (:func:`.cost.occupancy`; None: a policy
    that needs it computes it from ``candidates``); ``draw(worker)`` is the requests per second that
    came for the worker's cache lately (:class:`.draw.CacheDraw`; None: not known)."""

    prompt_tokens: TokenCount
    chunk_size: int
    candidates: tuple[Candidate, ...]
    request_seq: int = 0
    request_key: int = 0
    home: WorkerId | None = None
    home_pinned: bool = True
    chunks: tuple[ChunkHash, ...] = ()
    placed: Callable[[WorkerId], float] | None = None
    shared: SharedPrefix | None = None
    intake: Callable[[WorkerId], float] | None = None
    occupancy: float | None = None
    draw: Callable[[WorkerId], float] | None = None

    def __post_init__(self) -> None:
        if not self.candidates:
            raise ValueError("a route request needs at least one candidate worker")


@dataclass(frozen=True, slots=True)
class RouteDecision:
    """The chosen worker, why, and how many prompt tokens the policy expects to be cached there
    (the worker reports the actual number; the two together measure the router's accuracy)."""

    worker_id: WorkerId
    reason: RouteReason
    predicted_cached_tokens: TokenCount
    matched_chunks: ChunkCount = 0
    estimated_ttft_s: float | None = None


@dataclass(frozen=True, slots=True)
class WarmUp:
    """A prefill of the prompt's first ``tokens`` tokens (its shared opening, whole chunks) that
    ``worker_id`` should run at background priority: a copy of a hot opening made before requests
    for it arrive there (:mod:`.warmups`)."""

    worker_id: WorkerId
    tokens: TokenCount


@dataclass(frozen=True, slots=True)
class KVSource:
    """Another worker that holds the prompt's first ``tokens`` tokens, more than the chosen worker
    reuses: the chosen worker may fetch their KV from it instead of computing them
    (:mod:`.kv_source`)."""

    worker_id: WorkerId
    tokens: TokenCount


@dataclass(frozen=True, slots=True)
class Routed:
    """A decision with what it was based on; ``lookup`` is None in fallback (degraded) mode."""

    decision: RouteDecision
    lookup: LookupResult | None
    num_chunks: ChunkCount
    ticket: int = 0  # identifies the decision's in-flight record (0: none, a preview)
    lookup_s: float | None = None  # how long the index lookup took (None: it failed)
    presumed: tuple[WorkerId, int] | None = None  # (soft home, opening tokens) presumed to hold the prompt
    opening: int = 0  # chunks of the prompt's shared opening (where the prompts seen part ways)
    warm: WarmUp | None = None  # a copy of the opening to make off the request path (route() only)
    source: KVSource | None = None  # where the chosen worker may fetch the prefix it lacks (route() only)

    @property
    def degraded(self) -> bool:
        return self.lookup is None


class RoutingPolicy(Protocol):
    """A pure function of its request and config: same input, same decision."""

    name: str

    def choose(self, request: RouteRequest) -> RouteDecision: ...


@runtime_checkable
class LearningPolicy(RoutingPolicy, Protocol):
    """A policy with a record of its own, built from the requests it routed (as a peer router's
    approximate prefix tree is): ``choose`` reads the record, never changes it; the router calls
    :meth:`learn` once per request actually routed (not for previews), with its chunk hashes, the
    worker it went to and the router's clock."""

    def learn(self, chunks: tuple[ChunkHash, ...], worker_id: WorkerId, now_ms: int) -> None: ...


@dataclass(frozen=True, slots=True)
class GroupedRequest:
    """A :class:`RouteRequest` at scale: the candidates without matches (``candidates[i]`` has queue
    estimate ``queue_s[i]`` and ``position`` maps ids to ``i``), and the lookup's cohorts (workers
    with identical runs; a cohort's workers not among the candidates are ignored)."""

    prompt_tokens: TokenCount
    chunk_size: int
    candidates: tuple[Candidate, ...]
    position: dict[WorkerId, int]
    queue_s: tuple[float, ...]
    cohorts: tuple[Cohort, ...]
    request_seq: int = 0
    request_key: int = 0
    home: WorkerId | None = None
    home_pinned: bool = True
    placed: Callable[[WorkerId], float] | None = None
    shared: SharedPrefix | None = None
    intake: Callable[[WorkerId], float] | None = None
    occupancy: float | None = None
    draw: Callable[[WorkerId], float] | None = None


@runtime_checkable
class GroupedPolicy(RoutingPolicy, Protocol):
    """A policy that also decides from cohorts, in time that does not grow with the workers that
    share a prefix; ``choose_grouped`` decides exactly as ``choose`` on the same input."""

    def queue_s(self, candidate: Candidate) -> float: ...

    def choose_grouped(self, request: GroupedRequest) -> RouteDecision: ...
