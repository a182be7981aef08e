"""Hand-made traces for the simulator tests: blocks of 512 tokens, chunks of 128 (4 per block)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from pathlib import Path

from bench.bailian_twin import write_twin
from kvgate.gateway.routing import get_policy
from kvgate.gateway.routing.config import RoutingConfig
from kvgate.sim import SimSettings, TraceRequest, Workload
from kvgate.sim.engine import ClusterSim
from kvgate.sim.results import PolicyResult, RequestRecord

BLOCK = 512


def req(at_s: float, ids: Sequence[int], tokens: int | None = None, output: int = 1) -> TraceRequest:
    """A request arriving at ``at_s`` whose prompt is the blocks ``ids`` (the last one cut to fit
    ``tokens``; all full by default)."""
    return TraceRequest(at_s * 1000, tokens or BLOCK * len(ids), output, tuple(ids))


def workload(*requests: TraceRequest) -> Workload:
    return Workload.build(requests, BLOCK, 128)


def replay(
    policy: str, requests: Sequence[TraceRequest], settings: SimSettings, config: RoutingConfig | None = None
) -> tuple[PolicyResult, list[RequestRecord]]:
    """``policy`` (with ``config``, default the defaults) over ``requests``: the summary and every
    request's record, in arrival order."""
    sim = ClusterSim(workload(*requests), settings, get_policy(policy, config), get_policy("least_loaded"))
    result = asyncio.run(sim.run())
    return result, sim.records


def cached(policy: str, requests: Sequence[TraceRequest], settings: SimSettings) -> list[int]:
    """The tokens each request found cached on its worker."""
    return [r.cached_tokens for r in replay(policy, requests, settings)[1]]


def write_trace(path: Path, requests: Sequence[TraceRequest]) -> Path:
    records = [
        {
            "timestamp": r.timestamp_ms,
            "input_length": r.input_length,
            "output_length": r.output_length,
            "hash_ids": list(r.hash_ids),
        }
        for r in requests
    ]
    path.write_text("".join(json.dumps(record) + "\n" for record in records))
    return path


def write_bailian_trace(path: Path, requests: Sequence[TraceRequest]) -> Path:
    """``requests`` (blocks of :data:`BLOCK` tokens) as a Qwen-Bailian trace (``bench/bailian_twin.py``)."""
    return write_twin(path, requests, BLOCK)
