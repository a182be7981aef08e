"""A whole simulation run: the references, then every requested policy on the same workload."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import asdict

from kvgate.gateway.routing import get_policy, policy_names
from kvgate.gateway.routing.config import RoutingConfig
from kvgate.sim.engine import ClusterSim, Progress
from kvgate.sim.reference import pooled_hit_rate, unlimited_hit_rate
from kvgate.sim.results import PolicyResult, SimReport
from kvgate.sim.settings import SimSettings
from kvgate.sim.workload import Workload

FALLBACK_POLICY = "least_loaded"  # what the gateway falls back to when the index is down

ProgressFactory = Callable[[str], Progress | None]  # policy name -> its progress callback


def resolve_policies(names: Sequence[str]) -> list[str]:
    """Policy names in the order given, ``all`` expanded, duplicates dropped; ValueError if unknown."""
    resolved: list[str] = []
    for name in names:
        for one in policy_names() if name == "all" else (name,):
            get_policy(one)  # ValueError naming the known policies
            if one not in resolved:
                resolved.append(one)
    if not resolved:
        raise ValueError("no policy to simulate")
    return resolved


def simulate_policy(
    workload: Workload,
    settings: SimSettings,
    name: str,
    routing: RoutingConfig | None = None,
    progress: Progress | None = None,
) -> PolicyResult:
    """One policy's replay of ``workload`` on a fresh cluster (index, router, workers, clock)."""
    config = routing or RoutingConfig()
    sim = ClusterSim(
        workload, settings, get_policy(name, config), get_policy(FALLBACK_POLICY, config), progress
    )
    return asyncio.run(sim.run())


def simulate(
    workload: Workload,
    settings: SimSettings,
    policies: Sequence[str],
    routing: RoutingConfig | None = None,
    progress: ProgressFactory | None = None,
) -> SimReport:
    """The references and each policy of ``policies`` (names or ``all``) on ``workload``."""
    if workload.chunk_size != settings.chunk_size:
        raise ValueError("the workload was hashed with another chunk size than the settings'")
    results = {
        name: simulate_policy(workload, settings, name, routing, progress(name) if progress else None)
        for name in resolve_policies(policies)
    }
    return SimReport(
        requests=len(workload.requests),
        prompt_tokens=workload.prompt_tokens,
        unlimited_hit_rate=unlimited_hit_rate(workload),
        pooled_hit_rate=pooled_hit_rate(workload, settings),
        policies=results,
        settings={"sim": asdict(settings), "routing": asdict(routing or RoutingConfig())},
    )
