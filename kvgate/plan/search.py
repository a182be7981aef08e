"""The sweep: simulate a trace over worker counts and KV dtypes at fixed memory, recommend the smallest.

Each KV dtype has its memory plan (:mod:`kvgate.plan.memory`): the same GPU and CPU bytes hold more
tokens in int8/fp8 than in bf16. A candidate is (workers, CPU tier size, KV dtype); it is simulated exactly as
``kvgate simulate --workers N --capacity-tokens GPU --cpu-capacity-tokens CPU --policy P`` would (every
other setting at the simulator's defaults), so its figures can be checked by that command
(:func:`simulate_command`). The recommendation is the first candidate meeting the target in the order
fewest workers, then the smallest CPU tier, then the most precise KV dtype (more bytes per element
first): the cheapest fleet, and at that fleet size the least host memory and quantisation that suffice.
"""

from __future__ import annotations

import shlex
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from kvgate.plan.memory import MemoryPlan
from kvgate.sim.results import PolicyResult
from kvgate.sim.runner import simulate_policy
from kvgate.sim.settings import SimSettings
from kvgate.sim.trace import TraceRequest
from kvgate.sim.workload import Workload

ProgressLine = Callable[[str], None]


@dataclass(frozen=True, slots=True)
class Target:
    """What a configuration must reach: a token hit rate of at least ``hit_rate``, a TTFT p99 of at
    most ``ttft_p99_s``; None: not asked for. At least one is set."""

    hit_rate: float | None = None
    ttft_p99_s: float | None = None

    def __post_init__(self) -> None:
        if self.hit_rate is None and self.ttft_p99_s is None:
            raise ValueError("a sweep needs --target-hit-rate or --target-p99")
        if self.hit_rate is not None and not 0 <= self.hit_rate <= 1:
            raise ValueError(f"--target-hit-rate must be in [0, 1], got {self.hit_rate}")
        if self.ttft_p99_s is not None and self.ttft_p99_s <= 0:
            raise ValueError(f"--target-p99 must be positive, got {self.ttft_p99_s}")

    def met_by(self, result: PolicyResult) -> bool:
        hit_ok = self.hit_rate is None or result.hit_rate >= self.hit_rate
        return hit_ok and (self.ttft_p99_s is None or result.ttft_p99_s <= self.ttft_p99_s)

    def describe(self) -> str:
        parts = [f"hit rate >= {self.hit_rate:g}"] if self.hit_rate is not None else []
        parts += [f"TTFT p99 <= {self.ttft_p99_s:g} s"] if self.ttft_p99_s is not None else []
        return " and ".join(parts)


@dataclass(frozen=True, slots=True)
class Candidate:
    """One simulated configuration and what it reached."""

    workers: int
    kv_dtype: str
    cpu_memory_bytes: int
    capacity_tokens: int
    cpu_capacity_tokens: int
    hit_rate: float
    ttft_p99_s: float
    meets_target: bool


@dataclass(frozen=True, slots=True)
class Sweep:
    """Every candidate in the order simulated; ``recommended`` is None when none meets the target."""

    target: Target
    policy: str
    candidates: tuple[Candidate, ...]
    recommended: Candidate | None


def sweep(
    workload: Workload,
    plans: Sequence[MemoryPlan],
    worker_counts: Sequence[int],
    target: Target,
    policy: str = "kvgate",
    progress: ProgressLine | None = None,
) -> Sweep:
    """Simulates ``policy`` on ``workload`` for every worker count x plan of ``plans`` (one per KV
    dtype and CPU tier size; a fresh cluster each) and recommends per the module docstring. Pure but
    for ``progress`` lines."""
    order = [(n, plan) for n in sorted(set(worker_counts)) for plan in cost_order(plans)]
    candidates: list[Candidate] = []
    runs: dict[tuple[int, int, int], PolicyResult] = {}  # int8 and fp8 tiers are equal: simulated once
    for done, (workers, plan) in enumerate(order, start=1):
        began = time.monotonic()
        key = (workers, plan.gpu.tokens, plan.cpu.tokens)
        if key not in runs:
            runs[key] = simulate_policy(workload, sim_settings(plan, workers), policy)
        candidates.append(_candidate(runs[key], plan, workers, target))
        if progress is not None:
            c = candidates[-1]
            progress(f"plan: {done}/{len(order)} {workers} workers x {label(c)}: hit rate {c.hit_rate:.3f}, "
                     f"TTFT p99 {c.ttft_p99_s:.2f} s ({time.monotonic() - began:.1f} s)")  # fmt: skip
    chosen = next((c for c in candidates if c.meets_target), None)
    return Sweep(target, policy, tuple(candidates), chosen)


def workload_of(requests: Sequence[TraceRequest], block_tokens: int) -> Workload:
    """The trace hashed in the simulator's default chunks (what :func:`sim_settings` uses)."""
    return Workload.build(requests, block_tokens, SimSettings().chunk_size)


def cost_order(plans: Sequence[MemoryPlan]) -> list[MemoryPlan]:
    """The smallest CPU tier first, then the most bytes per KV element (stable among equals)."""
    return sorted(plans, key=lambda p: (p.inputs.cpu_memory_bytes, -p.inputs.kv.element_bytes))


def label(candidate: Candidate) -> str:
    """``int8``, or ``int8 + 64 GiB CPU`` when the candidate has a CPU tier."""
    cpu = candidate.cpu_memory_bytes
    return f"{candidate.kv_dtype} + {cpu / 2**30:g} GiB CPU" if cpu else candidate.kv_dtype


def sim_settings(plan: MemoryPlan, workers: int) -> SimSettings:
    """The simulator's settings for ``workers`` workers of ``plan``: its tiers, defaults otherwise."""
    return SimSettings(workers=workers, capacity_tokens=plan.gpu.tokens, cpu_capacity_tokens=plan.cpu.tokens)


def simulate_command(trace: str, candidate: Candidate, policy: str, extra: Sequence[str] = ()) -> str:
    """The ``kvgate simulate`` command line that replays ``candidate`` (``extra``: trace options)."""
    args = ["kvgate", "simulate", trace, "--policy", policy, "--workers", str(candidate.workers),
            "--capacity-tokens", str(candidate.capacity_tokens),
            "--cpu-capacity-tokens", str(candidate.cpu_capacity_tokens), *extra]  # fmt: skip
    return shlex.join(args)


def _candidate(result: PolicyResult, plan: MemoryPlan, workers: int, target: Target) -> Candidate:
    return Candidate(
        workers=workers,
        kv_dtype=plan.inputs.kv.name,
        cpu_memory_bytes=plan.inputs.cpu_memory_bytes,
        capacity_tokens=plan.gpu.tokens,
        cpu_capacity_tokens=plan.cpu.tokens,
        hit_rate=result.hit_rate,
        ttft_p99_s=result.ttft_p99_s,
        meets_target=target.met_by(result),
    )
