"""The routing cost model's parameters (one frozen object per gateway)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class RoutingConfig:
    """Validated on construction.

    Cost model (kvgate policy): prefill runs at ``prefill_tokens_per_s``; bringing a CPU-tier chunk
    back costs ``swap_in_cost_ratio`` of recomputing it; every running sequence adds
    ``decode_step_s`` to the wait; above ``kv_pressure_threshold`` KV usage the wait grows by up to
    ``kv_pressure_penalty`` x; a worker whose wait exceeds ``hot_spot_factor`` x the mean (and at
    least ``hot_spot_floor_s``) is skipped while others are not. A choice is scored by its TTFT plus
    ``compute_weight`` x the prefill seconds it adds to the cluster: recomputing a prefix that is
    cached elsewhere is not free even when that worker is idle, because the compute delays others.
    Defaults are for an H100-class GPU serving a 7-8B model.

    Near-ties: choices scored within ``near_tie_ratio`` x the best score plus ``near_tie_s`` of it
    are ranked with a random handicap of up to that window (fixed per request, the home worker
    none), so gateway replicas that share one view of the fleet do not all pick the same worker
    before its next load report shows their requests.

    Prefix affinity (SGLang cache-aware style): balance by load when max-min load >
    ``balance_abs_threshold`` and max > ``balance_rel_threshold`` x min; else take the longest match
    if it covers more than ``cache_threshold`` of the prompt.
    """

    prefill_tokens_per_s: float = 10_000.0
    compute_weight: float = 1.0
    swap_in_cost_ratio: float = 0.1
    decode_step_s: float = 0.002
    kv_pressure_threshold: float = 0.9
    kv_pressure_penalty: float = 1.0
    hot_spot_factor: float = 2.0
    hot_spot_floor_s: float = 10.0
    near_tie_ratio: float = 0.1
    near_tie_s: float = 0.0
    cache_threshold: float = 0.5
    balance_abs_threshold: int = 32
    balance_rel_threshold: float = 1.5

    def __post_init__(self) -> None:
        positive = ("prefill_tokens_per_s", "hot_spot_factor", "balance_rel_threshold")
        for name in positive:
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive")
        for name in ("compute_weight", "near_tie_ratio", "near_tie_s"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0")
        if not 0 <= self.kv_pressure_threshold < 1:
            raise ValueError("kv_pressure_threshold must be in [0, 1)")
        if not 0 <= self.cache_threshold <= 1:
            raise ValueError("cache_threshold must be in [0, 1]")
