"""The TTFT estimate behind the kvgate policy: prefill still to do + swap-in + queue."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from statistics import fmean

from kvgate.gateway.routing.config import RoutingConfig
from kvgate.gateway.routing.types import Candidate


@dataclass(frozen=True, slots=True)
class Estimate:
    """Seconds until the first token on one worker, by part, and the prompt tokens it would reuse."""

    worker_id: str
    reused_tokens: int
    prefill_s: float
    swap_in_s: float
    queue_s: float
    copy_s: float = 0.0  # the part of prefill_s that copies a shared opening other workers hold
    fetch_s: float = 0.0  # pulling the KV of a prefix another worker holds (a KV source) instead
    fetch_copy_s: float = 0.0  # the part of fetch_s that copies the shared opening
    fetched_s: float = 0.0  # the fetched tokens' prefill seconds (the cache room they take, as computed)

    @property
    def work_s(self) -> float:
        """Seconds the worker spends on the prompt before its first token: prefill, swap-in, fetch."""
        return self.prefill_s + self.swap_in_s + self.fetch_s

    @property
    def ttft_s(self) -> float:
        return self.work_s + self.queue_s

    def score(
        self, compute_weight: float, copy_weight: float | None = None, room_weight: float = 0.0
    ) -> float:
        """What the kvgate policy minimises: TTFT plus the weighted compute it adds."""
        return self.ttft_s + self.compute_cost(compute_weight, copy_weight, room_weight)

    def compute_cost(
        self, compute_weight: float, copy_weight: float | None = None, room_weight: float = 0.0
    ) -> float:
        """The work this choice adds, weighted: ``compute_weight`` per second of prefill, swap-in
        and fetch, of which the seconds that copy a shared opening weigh ``copy_weight`` (default:
        the same); fetched tokens also weigh ``room_weight`` (the part of the compute weight that
        prices the cache room a copy takes) per second their prefill would have taken beyond the
        fetch's: fetching is faster than computing, the room it fills is the same."""
        room = room_weight * (self.fetched_s - self.fetch_s) if self.fetch_s else 0.0
        copy = self.copy_s + self.fetch_copy_s
        if copy_weight is None or copy == 0:
            return compute_weight * self.work_s + room
        return compute_weight * (self.work_s - copy) + copy_weight * copy + room


def queue_seconds(candidate: Candidate, config: RoutingConfig) -> float:
    """Wait before this request's prefill starts: queued prefill, running decodes, KV pressure, and
    the candidate's start-up for this request (an adapter to load)."""
    load = candidate.load
    waiting = load.waiting_prefill_tokens + candidate.inflight_tokens
    wait = waiting / config.prefill_tokens_per_s + load.running_seqs * config.decode_step_s
    excess = load.kv_usage - config.kv_pressure_threshold
    if excess > 0:  # a full pool preempts or evicts: scale the wait up to (1 + penalty)x
        wait *= 1 + config.kv_pressure_penalty * excess / (1 - config.kv_pressure_threshold)
    return wait + candidate.startup_s


def estimate(
    candidate: Candidate,
    prompt_tokens: int,
    chunk_size: int,
    config: RoutingConfig,
    shared_tokens: int = 0,
    source_tokens: int = 0,
) -> Estimate:
    """The TTFT estimate of sending a ``prompt_tokens`` prompt to ``candidate``.

    GPU and pending chunks count as reused (a pending chunk is being computed by an earlier
    request right now); CPU chunks are reused at ``swap_in_cost_ratio`` of the prefill price. When
    another worker holds ``source_tokens`` of the prompt (its longest holder, :mod:`.kv_source`) and
    that is at least ``kv_fetch_min_tokens`` more than this worker reuses, the difference is fetched
    from it at ``kv_fetch_tokens_per_s`` instead of computed (:func:`fetched_tokens`). Of the rest,
    the tokens of the first ``shared_tokens`` (the opening other prompts share) this worker lacks
    are the copy (``copy_s``, ``fetch_copy_s``).
    """
    match = candidate.match
    hot = (match.gpu_chunks + match.pending_chunks) * chunk_size if match else 0
    cold = match.cpu_chunks * chunk_size if match else 0
    hot = min(hot, prompt_tokens)
    cold = min(cold, prompt_tokens - hot)
    reused = hot + cold
    fetched = fetched_tokens(min(source_tokens, prompt_tokens) - reused, config)
    tps = config.prefill_tokens_per_s
    opening = min(shared_tokens, prompt_tokens)
    fetch_copy = max(0, min(opening, reused + fetched) - reused)
    copy = max(0, opening - reused - fetched)
    return Estimate(
        worker_id=candidate.worker_id,
        reused_tokens=reused,
        prefill_s=(prompt_tokens - reused - fetched) / tps,
        swap_in_s=cold * config.swap_in_cost_ratio / tps,
        queue_s=queue_seconds(candidate, config),
        copy_s=copy / tps,
        fetch_s=fetched / config.kv_fetch_tokens_per_s if fetched else 0.0,
        fetch_copy_s=fetch_copy / config.kv_fetch_tokens_per_s if fetch_copy else 0.0,
        fetched_s=fetched / tps,
    )


def fetches(config: RoutingConfig) -> bool:
    """Whether a chosen worker fetches what a KV source holds rather than computing it: sources
    are on (``kv_fetch_min_tokens`` > 0) and fetching is faster than computing."""
    return config.kv_fetch_min_tokens > 0 and config.kv_fetch_tokens_per_s > config.prefill_tokens_per_s


def fetched_tokens(lacking: int, config: RoutingConfig) -> int:
    """Of the ``lacking`` prompt tokens that a KV source holds beyond what the worker reuses, those
    it fetches: all of them when at least ``kv_fetch_min_tokens`` and :func:`fetches`, else none."""
    return lacking if lacking >= config.kv_fetch_min_tokens and fetches(config) else 0


def hot_limit(queue_s: Sequence[float], config: RoutingConfig) -> float:
    """The queue (seconds) above which a worker is a hot spot: ``hot_spot_factor`` x the mean
    queue, at least ``hot_spot_floor_s``. ``queue_s`` is non-empty."""
    return max(config.hot_spot_factor * fmean(queue_s), config.hot_spot_floor_s)


def occupancy(candidates: Sequence[Candidate]) -> float | None:
    """The mean share of the candidates' GPU-tier blocks that hold KV (a sequence's, or a cached
    chunk's), over those reporting a GPU tier; None when none does. O(n)."""
    occupied = [
        1 - (c.load.gpu_blocks_free - c.load.gpu_blocks_cached) / c.load.gpu_blocks_total
        for c in candidates
        if c.load.gpu_blocks_total > 0
    ]
    return fmean(occupied) if occupied else None


def fullness(occupied: float | None, config: RoutingConfig) -> float:
    """How full the GPU tiers of mean ``occupied`` (:func:`occupancy`) are past
    ``full_cache_threshold``: 0 at or below it (or unknown, None), 1 when every block holds KV (a
    copy then evicts content that has not expired)."""
    if occupied is None:
        return 0.0
    start = config.full_cache_threshold
    return min(max((occupied - start) / (1 - start), 0.0), 1.0)
