"""The routing cost model's parameters (one frozen object per gateway)."""

from __future__ import annotations

import math
from dataclasses import dataclass, fields


@dataclass(frozen=True, slots=True)
class RoutingConfig:
    """Validated on construction.

    Cost model (kvgate policy): prefill runs at ``prefill_tokens_per_s``; bringing a CPU-tier chunk back
    costs ``swap_in_cost_ratio`` of recomputing it; every running sequence adds ``decode_step_s`` to the
    wait; above ``kv_pressure_threshold`` KV usage the wait grows by up to ``kv_pressure_penalty`` x; a
    worker whose wait exceeds ``hot_spot_factor`` x the mean (and at least ``hot_spot_floor_s``) is
    skipped while a cool worker would answer sooner (a hot worker computing the prompt's prefix right now
    is still waited for when that is the sooner answer). A choice is scored by its TTFT plus
    ``compute_weight`` x the prefill seconds it adds to the cluster: recomputing a prefix that is cached
    elsewhere is not free even when that worker is idle. The default 3 counts it three times: the compute
    delays the requests behind it, and the second copy takes cache room that evicts another prefix
    (measured over four trace shapes, seeds 0-4, ``bench/sim_policies.py``: 1 loses hit rate to needless
    copies; 3 against 2, with the session charge weighing the opening's footprint, kept the hit rate of
    8 workers over 1M-token caches and raised it over 300k-token caches: documents, seed 0, 0.853 ->
    0.887; the cost: follow-ups wait longer on a busy holder, agents at 64 workers p99 3.65 -> 4.42
    s). Defaults are for an H100-class GPU serving a 7-8B model.

    Full caches: a copy into a GPU tier that has no room left evicts content that has not expired
    and that later prompts would have reused; that loss is not in the compute. As the candidates'
    GPU tiers fill (blocks in use or cached, the mean over the candidates that report a tier) past
    ``full_cache_threshold``, the compute weight grows linearly by up to ``full_cache_weight`` (so
    9 when every tier is full), and the session charge and the demand that pays for copies of a
    shared opening (below) shrink to nothing (:func:`.cost.fullness`). Caches with room behave as
    before. Measured over 1M-token workers on the shared synthetic trace (full, seeds 0-4) and on
    conversation traces whose caches fill (``bench/workload_traces.py --shape pastes``): without it
    kvgate trailed SGLang by up to 0.004 and llm-d by up to 0.006 of hit rate there, losing it to
    copies; of 2, 4, 6 and 10, 6 was the least that put kvgate above SGLang on every synthetic seed
    and above llm-d on the longer pastes-like traces, and 10 gained nothing more (docs/BENCHMARKS.md
    section 1).

    Near-ties: choices scored within ``near_tie_ratio`` x the best score plus ``near_tie_s`` of it
    are ranked with a handicap of up to that window (the home worker none), so gateway replicas
    that share one view of the fleet do not all pick the same worker before its next load report
    shows their requests. The handicap blends a draw fixed per request with, at
    ``placement_weight``, the worker's share of the new content this router placed lately
    (decayed with ``placement_half_life_s``) times the share of the prompt the choice would place
    as new: new content spreads over the workers that took the least of it, as future requests
    follow content to where it was computed.

    Sessions: a prompt whose own content (past its shared opening) no worker holds opens a session
    -- a conversation, an agent's task, a reader's questions -- whose follow-ups will go where it is
    computed. Such a choice is charged ``session_weight`` seconds x the share of the worker's prefill
    capacity (``prefill_tokens_per_s``) that new content this router sent there took lately (a rate
    decayed with ``placement_half_life_s``), above the least any candidate took, x the opening's
    worth (:class:`.types.SharedPrefix`: spreading a session copies its opening, and an opening that
    fills a tenth of a worker's GPU tier evicts as much as spreading gains, so it is not charged):
    the work a worker's recent sessions will bring back, anticipated before it shows as queue, so new
    sessions spread over the workers that took the least instead of piling onto the holder of a
    popular opening. Follow-ups are never charged (their own content is held), and an idle cluster
    hardly charges at all. Each gateway replica counts only what it sent, so with N replicas the
    charge is about 1/N as strong. 0 turns it off. Measured at 0, 10 and 20 (compute weight 2) and
    30 (compute weight 3) over the four trace shapes at 8 workers, seeds 0-4 (40 on seeds 0-2
    balanced no better than 30), and 30 at 64 / 256 workers (``bench/sim_policies.py``,
    docs/BENCHMARKS.md section 1): the charge (30, compute weight 3) brought the imbalance of 8
    workers from 1.12-1.59 (no charge, compute weight 2) to 1.05-1.08 on conversations, 1.38-1.91
    to 1.07-1.61 on agents and 1.13-1.50 to 1.05-1.31 on documents, and the agents' TTFT p99 from
    0.80-4.63 s to 0.77-1.23 s, for up to 0.0012 of hit rate (the copies of shared openings that
    spreading takes). 30 with a compute weight of 3 balanced as 20 did with 2, for more hit rate
    where caches are small.

    Hot prefixes: copying an opening that many prompts share (see :class:`.types.SharedPrefix`) to
    one more worker serves that worker's share of its future requests, so the copy's compute
    weight is divided by 1 + ``copy_amortisation`` x (requests through the opening lately, decayed
    with ``placement_half_life_s``) / (holders + 1); 0 turns this off. A popular opening spreads
    over as many workers as its traffic needs instead of queueing on its first holder. The router
    discounts the demand by the opening's footprint (none left at a tenth of a worker's GPU tier:
    such a copy evicts as much as it serves). The default 0.05 shortened the TTFT tail of agent
    traces by 20-50% at the same hit rate; 0.2 and above copy long documents so often that the
    copies cost hit rate, and without the footprint discount documents over 300k-token caches lost
    0.08 of hit rate (``bench/sim_policies.py``).

    Blocking (``draw_weight``; 0 turns it off): a prefill of p seconds on a worker keeps the
    requests that come for that worker's cache while it runs waiting, about their rate x p x p / 2
    seconds in all. Every choice is charged ``draw_weight`` x that, the rate being the requests this
    router sent to the worker for its cache lately (:class:`.draw.CacheDraw`, decayed with
    ``placement_half_life_s``), fading as the GPU tiers fill past ``full_cache_threshold`` (as the
    session charge does: there it would crowd new content onto a few caches that then churn). A
    short prefill is hardly charged; a long new prompt goes to a worker few requests need instead of
    the holder of a popular document or of live sessions, whose next requests would wait behind it
    or recompute what it holds elsewhere. Each gateway replica counts only what it sent. Measured
    in docs/BENCHMARKS.md section 1 (``bench/sim_policies.py``, 0.5 against 0): over 8 workers x 1M
    tokens, seeds 0-2, documents seed 2's TTFT p99 8.19 -> 7.37 s (under SGLang's 7.87 s; the p99 is
    still the lowest in 14 of 15 runs, the synthetic trace's seed 2 now the miss); over 64 workers
    the synthetic trace's hit rate 0.6473 -> 0.6500 (seed 0: a 191k-token prompt no longer lands on
    the holder of an 82k-token document, which then had to be recomputed elsewhere); over 300k-token
    caches, documents at 8 workers 0.897 -> 0.905. The cost: the synthetic trace at 8 workers, seeds
    0-7 (kvgate alone), 0.5396 -> 0.5388 mean hit rate. Weights 0.25 and 1 (tried without the fade)
    did no better.

    Warm-ups (``warm_demand`` 0 turns them off): when a routed prompt's shared opening of at least
    ``warm_min_tokens`` has fewer holders than 1 + its demand (the requests through it lately, times
    its ``worth`` and the room the caches have, as for hot-prefix copies) / ``warm_demand``, the
    router asks one more worker to prefill the opening alone, at background priority (the engine
    gives such a prefill only what its steps leave): the worker among those not holding it whose
    queue is under ``warm_idle_s`` and that took the least new content lately; at most once per
    opening per ``warm_cooldown_s``. The copy then serves that worker's share of the opening's
    requests without one of them paying for it (docs/BENCHMARKS.md section 1, "Copies of a hot
    shared opening made off the request path").

    Warm-ups of busy openings (``warm_busy`` F, 0 by default: off): an opening also gets one more
    holder when the least queue among its holders exceeds F x its own prefill seconds over the room
    the caches have (1 - ``full``): a request for it would start sooner by copying it than by
    waiting, yet the copy weight keeps each one waiting. For many workers and bursts of sessions
    that share long openings: at 64 workers (kvgate alone, F 1, seeds 0-2, 1M- and 300k-token
    caches) agents' p99 reads 1.5-2.0 s against 2.5-9.6 s and documents' 4.0-7.2 s against 5.6-12.0
    s, the hit rate up on chat, agents, documents and pastes and down 0.0001-0.0023 on the synthetic
    trace; at 8 workers it gains nothing and moves documents' tail the wrong way, so it is off by
    default (docs/BENCHMARKS.md section 1, "0.3M tokens per worker").

    KV sources: when the chosen worker reuses at least ``kv_fetch_min_tokens`` fewer prompt tokens
    than another worker holds (the policy moved the request off a busy holder), the decision names
    that holder (:mod:`.kv_source`) and the chosen worker fetches the prefix's KV from it instead of
    computing it (kvgate's policy only: the peers' routers have no such path). Only while fetching
    is faster than computing: ``kv_fetch_tokens_per_s`` (how fast a worker pulls another's KV; the
    default 20k tokens/s is ~2.6 GB/s of an 8B model's 128 KiB tokens, an assumption for server
    nodes on a 25 Gb/s or faster link: measure yours with ``bench/kv_fetch.py``) above
    ``prefill_tokens_per_s``. ``kv_fetch_min_tokens`` 0 (or a fetch rate at or below the prefill
    rate) names no source. The policy prices such a move as the fetch (:func:`.cost.estimate`): the
    fetch's seconds in the TTFT and the work, and in full caches the room the copy takes at the
    fetched tokens' prefill seconds (``full_cache_weight`` x how full). Measured against pricing it
    as a recomputation (kvgate alone, 8 workers x 1M tokens, five traces, seeds 0-2, and the
    conversation trace): hit rate -0.0009 to +0.0040 (synthetic seed 2 0.5384 -> 0.5424, pastes
    seed 0 0.4140 -> 0.4131), TTFT p99 lower in 12 of 18 runs and higher in 5 (documents by up to
    0.41 s); at 64 workers x 300k tokens, agents' p99 4.60 -> 2.23 s at a higher hit rate; at 8
    workers x 300k tokens the synthetic and documents traces lose 0.007 of hit rate (those caches
    evict reusable content before they read as full past ``full_cache_threshold``, where the room
    weight starts; docs/BENCHMARKS.md section 1).

    Prefix affinity (SGLang cache-aware style): balance by load when max-min load >
    ``balance_abs_threshold`` and max > ``balance_rel_threshold`` x min; else take the longest match
    if it covers more than ``cache_threshold`` of the prompt.
    """

    prefill_tokens_per_s: float = 10_000.0
    compute_weight: float = 3.0
    full_cache_weight: float = 6.0
    full_cache_threshold: float = 0.9
    swap_in_cost_ratio: float = 0.1
    decode_step_s: float = 0.002
    kv_pressure_threshold: float = 0.9
    kv_pressure_penalty: float = 1.0
    hot_spot_factor: float = 2.0
    hot_spot_floor_s: float = 10.0
    near_tie_ratio: float = 0.1
    near_tie_s: float = 0.0
    placement_weight: float = 0.5
    placement_half_life_s: float = 60.0
    session_weight: float = 30.0
    draw_weight: float = 0.5
    copy_amortisation: float = 0.05
    warm_demand: float = 10.0
    warm_idle_s: float = 0.05
    warm_cooldown_s: float = 5.0
    warm_min_tokens: int = 512
    warm_busy: float = 0.0
    kv_fetch_min_tokens: int = 512
    kv_fetch_tokens_per_s: float = 20_000.0
    cache_threshold: float = 0.5
    balance_abs_threshold: int = 32
    balance_rel_threshold: float = 1.5

    def __post_init__(self) -> None:
        for name, value in ((f.name, getattr(self, f.name)) for f in fields(self)):
            if not math.isfinite(value):
                raise ValueError(f"{name} must be a finite number, not {value!r}")
        positive = ("prefill_tokens_per_s", "hot_spot_factor", "balance_rel_threshold")
        for name in positive:
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive")
        if not 0 <= self.placement_weight <= 1:
            raise ValueError("placement_weight must be in [0, 1]")
        if self.placement_half_life_s <= 0:
            raise ValueError("placement_half_life_s must be positive")
        weights = ("compute_weight", "full_cache_weight", "copy_amortisation", "session_weight")
        weights += ("draw_weight",)
        rest = ("swap_in_cost_ratio", "decode_step_s", "kv_pressure_penalty", "hot_spot_floor_s")
        rest += ("warm_demand", "warm_idle_s", "warm_cooldown_s", "warm_min_tokens", "warm_busy")
        rest += ("kv_fetch_min_tokens", "kv_fetch_tokens_per_s")
        for name in (*weights, *rest, "near_tie_ratio", "near_tie_s", "balance_abs_threshold"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0")
        if not 0 <= self.full_cache_threshold < 1:
            raise ValueError("full_cache_threshold must be in [0, 1)")
        if not 0 <= self.kv_pressure_threshold < 1:
            raise ValueError("kv_pressure_threshold must be in [0, 1)")
        if not 0 <= self.cache_threshold <= 1:
            raise ValueError("cache_threshold must be in [0, 1]")
