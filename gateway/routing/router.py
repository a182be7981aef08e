"""The gateway's routing step: index lookup, policy, pending entries, in-flight accounting.

The policies are pure; this is the stateful shell around them (one per gateway process, owned by
the composition root). It never blocks: the index calls are bounded by the index's own timeout,
and when the index is unavailable the request is routed by load alone, a prompt_cache_key's
requests to the key's home while it is not a hot spot (reason FALLBACK).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import time
from collections.abc import Callable, Container, Mapping, Sequence
from dataclasses import replace

from kvgate.common.clock import Clock
from kvgate.gateway.routing.branches import PrefixBranches
from kvgate.gateway.routing.config import RoutingConfig
from kvgate.gateway.routing.cost import fetches, fullness
from kvgate.gateway.routing.demand import OpeningDemand
from kvgate.gateway.routing.draw import CacheDraw
from kvgate.gateway.routing.fleet import Fleet, FleetView
from kvgate.gateway.routing.home import home_worker
from kvgate.gateway.routing.keyed_fallback import fallback_choice
from kvgate.gateway.routing.kv_source import kv_source
from kvgate.gateway.routing.learned import LearnedHoldings
from kvgate.gateway.routing.local_pending import LocalPending
from kvgate.gateway.routing.placed import PlacedContent
from kvgate.gateway.routing.presumption import HomePresumption, presume_home
from kvgate.gateway.routing.types import (
    Candidate,
    GroupedPolicy,
    GroupedRequest,
    KVSource,
    LearningPolicy,
    Routed,
    RouteRequest,
    RoutingPolicy,
    SharedPrefix,
    WarmUp,
)
from kvgate.gateway.routing.warmups import WarmUpPlanner
from kvgate.index.base import PrefixIndex
from kvgate.index.types import IndexUnavailableError, LookupResult, PrefixMatch, WorkerStatus
from kvgate.proto.ids import ChunkHash, WorkerId
from kvgate.proto.layout import DEFAULT_BLOCK_SIZE, DEFAULT_TTL_S
from kvgate.proto.units import TokenCount

_FOOTPRINT_SCALE = 10.0  # an opening of a tenth of a worker's GPU tier earns no copy by demand


class Router:
    """Routes requests; remembers the uncached prompt tokens it sent to each worker until
    :meth:`prefill_done`, so a burst between two heartbeats is not all sent to one "idle" worker.
    Only what was routed after a worker's last heartbeat counts on top of that heartbeat's queue:
    anything older is in the queue the worker reported already.

    For workers the index does not follow (:attr:`WorkerStatus.followed` False), lookups use what
    this router learned from its own decisions (:class:`LearnedHoldings`: chunks it sent there, for
    ``kv_ttl_s``, within the worker's capacity counted in ``block_tokens``-token blocks); a prompt's
    soft home is the rendezvous worker of the first chunk of its own content (:meth:`_home`), and a
    prompt whose own content this router never saw may be presumed cached there
    (:class:`HomePresumption`, which learns from :meth:`reused` whether that pays).

    A prompt's shared opening -- its chunks up to where the prompts this router saw part ways
    (:class:`PrefixBranches`) -- goes to the policy with how many requests went through it lately
    (:class:`OpeningDemand`): what a copy of it on another worker would serve."""

    def __init__(
        self,
        index: PrefixIndex,
        policy: RoutingPolicy,
        fallback: RoutingPolicy,
        chunk_size: int,
        pending_ttl_s: float,
        clock: Clock,
        kv_ttl_s: float = DEFAULT_TTL_S,
        block_tokens: int = DEFAULT_BLOCK_SIZE,
        presumption: HomePresumption | None = None,
    ) -> None:
        self._index = index
        self._clock = clock
        self._local = LocalPending(pending_ttl_s, monotonic=lambda: clock.now_ms() / 1000)
        self._learned = LearnedHoldings(kv_ttl_s, monotonic=lambda: clock.now_ms() / 1000)
        config = getattr(policy, "config", None)  # the cost model's settings, where the policy has them
        self._config = config if isinstance(config, RoutingConfig) else RoutingConfig()
        half_life = self._config.placement_half_life_s
        self._placed = PlacedContent(half_life, monotonic=lambda: clock.now_ms() / 1000)
        self._draw = CacheDraw(half_life, monotonic=lambda: clock.now_ms() / 1000)
        self._block_tokens = block_tokens
        self._branches = PrefixBranches()  # where the prompts seen part ways: their shared openings
        self._demand = OpeningDemand(half_life, monotonic=lambda: clock.now_ms() / 1000)
        self._warmups = WarmUpPlanner(self._config, monotonic=lambda: clock.now_ms() / 1000)
        self._warms_up = getattr(policy, "warms_up", False) is True  # kvgate's; no peer router has them
        self._fetches = getattr(policy, "fetches_kv", False) is True  # names KV sources (kvgate's only)
        self._presumption = HomePresumption() if presumption is None else presumption
        self._policy = policy
        self._grouped_policy = policy if isinstance(policy, GroupedPolicy) else None
        self._learning_policy = policy if isinstance(policy, LearningPolicy) else None
        self._fleet = FleetView(_queue_estimate(policy), self.inflight_tokens)
        self._fallback = fallback
        self._chunk_size = chunk_size
        self._seq = itertools.count()
        self._tickets = itertools.count(1)
        self._inflight: dict[WorkerId, dict[int, tuple[int, int]]] = {}  # ticket -> (routed at ms, tokens)
        self._writes: set[asyncio.Task[None]] = set()  # pending-entry writes still in flight

    @property
    def config(self) -> RoutingConfig:
        """The cost model's settings: the policy's, or the defaults for a policy without them."""
        return self._config

    async def route(
        self,
        hashes: Sequence[ChunkHash],
        prompt_tokens: TokenCount,
        workers: Sequence[WorkerStatus],
        request_key: int,
        cache_key: str | None = None,
        startup_s: Mapping[WorkerId, float] | None = None,
    ) -> Routed:
        """Chooses a worker among ``workers`` (non-empty) and records the choice: the in-flight
        tokens and a local pending record at once, the index's pending entries in the background
        (off the request's path: this gateway already follows its own record, other gateways
        see the entries a round trip later). ``startup_s``: seconds some workers need before they
        can start this request (see :meth:`Fleet.with_startup`). Mutates this router."""
        routed = await self.preview(hashes, prompt_tokens, workers, request_key, cache_key, startup_s)
        decision = routed.decision
        ticket = next(self._tickets)
        uncached = prompt_tokens - decision.predicted_cached_tokens
        self._inflight.setdefault(decision.worker_id, {})[ticket] = (self._clock.now_ms(), uncached)
        self._placed.add(decision.worker_id, uncached)
        self._draw.record(decision.worker_id, decision.predicted_cached_tokens)
        self._fleet.touch(decision.worker_id)
        wait_s = decision.estimated_ttft_s or 0.0  # pending until then, here and on every gateway
        self._local.record(hashes, decision.worker_id, wait_s)
        if self._learning_policy is not None:
            now_ms = self._clock.now_ms()
            self._learning_policy.learn(tuple(hashes), decision.worker_id, now_ms)
        fleet = self._fleet.current(workers)
        if (blocks := fleet.unfollowed.get(decision.worker_id)) is not None:
            self._learned.record(hashes, decision.worker_id, blocks * self._block_tokens // self._chunk_size)
        if routed.opening:
            self._demand.count(hashes[routed.opening - 1])
        if hashes:
            self._branches.record(hashes)
        if routed.presumed is not None and routed.presumed[0] == decision.worker_id:
            self._presumption.made(ticket, routed.presumed[1])
        to_compute = list(hashes[decision.matched_chunks :])  # what the chosen worker does not hold yet
        if not routed.degraded and to_compute:
            self._write_pending(to_compute, decision.worker_id, wait_s)
        warm = self._warm_up(hashes, prompt_tokens, workers, routed)
        source = self._source(routed, prompt_tokens, request_key, fleet.position)
        return replace(routed, ticket=ticket, warm=warm, source=source)

    def _source(
        self, routed: Routed, prompt_tokens: TokenCount, request_key: int, among: Container[WorkerId]
    ) -> KVSource | None:
        """The worker ``among`` the candidates the chosen one may fetch the prompt's prefix from
        (:func:`.kv_source.kv_source`); None for a policy without ``fetches_kv`` (the peers'
        routers), in fallback mode, and while fetching is no faster than computing
        (``kv_fetch_tokens_per_s`` <= ``prefill_tokens_per_s``)."""
        config = self._config
        if not self._fetches or routed.lookup is None:
            return None
        if not fetches(config):
            return None
        decision = routed.decision
        return kv_source(
            routed.lookup,
            decision.worker_id,
            decision.predicted_cached_tokens,
            prompt_tokens,
            self._chunk_size,
            config.kv_fetch_min_tokens,
            request_key,
            among,
        )

    def _warm_up(
        self,
        hashes: Sequence[ChunkHash],
        prompt_tokens: TokenCount,
        workers: Sequence[WorkerStatus],
        routed: Routed,
    ) -> WarmUp | None:
        """A copy of the prompt's shared opening to make on one more worker at background priority
        (:class:`WarmUpPlanner`), recorded as that worker's pending content and new intake; None
        when it is not wanted (or ``warm_demand`` is 0, or the index is unavailable), and always for a
        policy without ``warms_up`` (the peers' routers: they have no such path)."""
        lookup, opening = routed.lookup, routed.opening
        if not (self._warms_up and self._config.warm_demand) or lookup is None or not opening:
            return None
        fleet = self._fleet.current(workers)
        shared = self._shared(hashes, opening, fleet)
        if shared is None:
            return None
        holders = {w for w, m in lookup.matches.items() if len(m.tiers) >= opening}
        holders.add(routed.decision.worker_id)
        full = fullness(fleet.occupancy, self._config)
        warm = self._warmups.plan(hashes[opening - 1], shared, full, fleet, holders, self._placed.rate)
        if warm is None:
            return None
        tokens = TokenCount(min(warm.tokens, prompt_tokens))
        wait_s = tokens / self._config.prefill_tokens_per_s  # an idle worker's prefill of it
        self._placed.add(warm.worker_id, tokens)
        self._local.record(hashes[:opening], warm.worker_id, wait_s)
        self._write_pending(list(hashes[:opening]), warm.worker_id, wait_s)
        return WarmUp(warm.worker_id, tokens)

    def _write_pending(self, hashes: list[ChunkHash], worker_id: WorkerId, wait_s: float) -> None:
        task = asyncio.create_task(self._mark_pending(hashes, worker_id, wait_s))
        self._writes.add(task)
        task.add_done_callback(self._writes.discard)

    async def drain(self) -> None:
        """Waits for the pending-entry writes in flight (on shutdown, and in tests)."""
        while self._writes:
            await asyncio.gather(*self._writes)

    async def preview(
        self,
        hashes: Sequence[ChunkHash],
        prompt_tokens: TokenCount,
        workers: Sequence[WorkerStatus],
        request_key: int,
        cache_key: str | None = None,
        startup_s: Mapping[WorkerId, float] | None = None,
    ) -> Routed:
        """The decision :meth:`route` would make now, recording nothing (the dry-run view)."""
        started = time.perf_counter()
        lookup = await self._lookup(hashes)
        lookup_s = time.perf_counter() - started if lookup is not None else None
        # From here to the end of route()'s bookkeeping there is no await: concurrent requests
        # see each other's decisions through the local record.
        fleet = self._fleet.current(workers)
        if startup_s:
            fleet = fleet.with_startup(startup_s)
        opening = self._branches.own_start(hashes) if hashes else 0
        own = opening if fleet.unfollowed else 0
        home = self._home(hashes, fleet, cache_key, own)
        shared = self._shared(hashes, opening, fleet)
        presumed = None
        if lookup is None:
            request = self._request(prompt_tokens, fleet, {}, request_key, home, hashes, None)
            decision = fallback_choice(self._fallback, request, self._config)
            return Routed(decision, None, len(hashes), opening=opening)
        if fleet.unfollowed:
            lookup = self._learned.merge(lookup, hashes, fleet.unfollowed)
            if home[0] is not None and not home[1]:
                lookup, presumed = presume_home(lookup, len(hashes), home[0], own, self._presumption)
        lookup = self._local.merge(lookup, hashes)
        if self._grouped_policy is not None:
            grouped = self._grouped(prompt_tokens, fleet, lookup, request_key, home, shared)
            decision = self._grouped_policy.choose_grouped(grouped)
        else:
            decision = self._policy.choose(
                self._request(prompt_tokens, fleet, lookup.matches, request_key, home, hashes, shared)
            )
        presumption = (presumed, own * self._chunk_size) if presumed is not None else None
        return Routed(decision, lookup, len(hashes), lookup_s=lookup_s, presumed=presumption, opening=opening)

    def prefill_done(self, routed: Routed) -> None:
        """The request's prefill finished (or the request failed): its tokens stop counting as in
        flight. Idempotent."""
        entries = self._inflight.get(routed.decision.worker_id, {})
        if entries.pop(routed.ticket, None) is not None:
            self._fleet.touch(routed.decision.worker_id)
        if not entries:
            self._inflight.pop(routed.decision.worker_id, None)

    def reused(self, routed: Routed, cached_tokens: int) -> None:
        """The worker reported reusing ``cached_tokens`` of the prompt of ``routed`` (from its
        reply): a presumption learns whether it paid."""
        self._presumption.outcome(routed.ticket, cached_tokens)

    def inflight_tokens(self, worker_id: WorkerId, since_ms: int = -1) -> int:
        """Uncached prompt tokens routed to ``worker_id`` at or after ``since_ms`` (a heartbeat in the
        same millisecond cannot have seen them yet) and not yet prefilled."""
        entries = self._inflight.get(worker_id, {}).values()
        return sum(tokens for routed_at, tokens in entries if routed_at >= since_ms)

    def forget(self, worker_id: WorkerId) -> None:
        """Drops what this router learned of ``worker_id``'s holdings (its call failed)."""
        self._learned.forget(worker_id)
        self._placed.forget(worker_id)
        self._draw.forget(worker_id)

    async def _lookup(self, hashes: Sequence[ChunkHash]) -> LookupResult | None:
        try:
            return await self._index.lookup(hashes)
        except IndexUnavailableError:
            return None

    async def _mark_pending(self, hashes: Sequence[ChunkHash], worker_id: WorkerId, wait_s: float) -> None:
        with contextlib.suppress(IndexUnavailableError):  # a lost hint costs a scattered burst at most
            await self._index.add_pending(hashes, worker_id, wait_s)

    def _request(
        self,
        prompt_tokens: TokenCount,
        fleet: Fleet,
        matches: dict[WorkerId, PrefixMatch],
        request_key: int,
        home: tuple[WorkerId | None, bool],
        hashes: Sequence[ChunkHash],
        shared: SharedPrefix | None,
    ) -> RouteRequest:
        candidates = tuple(replace(c, match=matches[c.worker_id]) if c.worker_id in matches else c
                           for c in fleet.candidates)  # fmt: skip
        seq = next(self._seq)
        chunks = tuple(hashes) if self._learning_policy is not None else ()
        return RouteRequest(
            prompt_tokens,
            self._chunk_size,
            candidates,
            seq,
            request_key,
            *home,
            chunks,
            self._placed.share,
            shared,
            self._placed.rate,
            fleet.occupancy,
            self._draw.rate,
        )

    def _grouped(
        self,
        prompt_tokens: TokenCount,
        fleet: Fleet,
        lookup: LookupResult,
        request_key: int,
        home: tuple[WorkerId | None, bool],
        shared: SharedPrefix | None,
    ) -> GroupedRequest:
        return GroupedRequest(
            prompt_tokens, self._chunk_size, fleet.candidates, fleet.position, fleet.queue_s, lookup.cohorts,
            next(self._seq), request_key, *home, self._placed.share, shared, self._placed.rate,
            fleet.occupancy, self._draw.rate,
        )  # fmt: skip

    def _shared(self, hashes: Sequence[ChunkHash], opening: int, fleet: Fleet) -> SharedPrefix | None:
        """The prompt's shared opening (its first ``opening`` chunks, where prompts seen branched),
        the requests that went through it lately, and its footprint's ``worth``: a copy takes cache
        room that held other content, nothing is gained by copying an opening of a tenth of a
        worker's cache or more (worth 0; also while no candidate has reported its GPU tier: nothing
        is copied for demand or sessions on a guess). None when it shares none."""
        if not opening:
            return None
        tokens = opening * self._chunk_size
        room = fleet.mean_gpu_blocks * self._block_tokens
        footprint = tokens / room if room > 0 else 1.0
        worth = max(0.0, 1.0 - _FOOTPRINT_SCALE * footprint)
        return SharedPrefix(tokens, self._demand.uses(hashes[opening - 1]), worth)

    def _home(
        self, hashes: Sequence[ChunkHash], fleet: Fleet, cache_key: str | None, own: int
    ) -> tuple[WorkerId | None, bool]:
        """(home, pinned): the prompt_cache_key's worker, pinned; else, while some workers are not
        followed, the rendezvous worker among them of ``hashes[own]``, the first chunk of the
        prompt's own content, as a soft home (it wins near-ties, and presumptions): every turn of
        a conversation has the same one, at every gateway, so gateways that cannot see each other's
        decisions still place a conversation alike."""
        if cache_key:
            return home_worker(cache_key, fleet.position), True
        if fleet.unfollowed and hashes:
            return home_worker(hashes[own].hex(), fleet.unfollowed), False
        return None, True


def _queue_estimate(policy: RoutingPolicy) -> Callable[[Candidate], float]:
    """The policy's queue estimate (grouped policies), else none needed (0)."""
    return policy.queue_s if isinstance(policy, GroupedPolicy) else (lambda _c: 0.0)
