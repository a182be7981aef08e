"""Trace-replay simulator: real hashing, index, router and policies over simulated workers.

A trace of Mooncake or Qwen-Bailian records (:mod:`.trace`, :mod:`.trace_format`) becomes token ids
and real chunk hashes (:mod:`.tokens`, :mod:`.workload`); each policy is replayed on a fresh
simulated cluster (:mod:`.engine`): the gateway's :class:`~kvgate.gateway.routing.router.Router`
over a :class:`~kvgate.index.MemoryPrefixIndex` on a :class:`~kvgate.common.clock.ManualClock`, and
workers (:mod:`.worker`) with a two-tier LRU + TTL prefix cache (:mod:`.kvcache`) and a time model
(:mod:`.timing`) that publish events and heartbeats to the index. :mod:`.reference` gives the
unlimited and pooled-cache ceilings; :mod:`.runner` runs it all.
Torch-free, like the gateway it exercises.
"""

from kvgate.sim.results import PolicyResult, SimReport
from kvgate.sim.runner import resolve_policies, simulate, simulate_policy
from kvgate.sim.settings import SimSettings
from kvgate.sim.trace import Trace, TraceRequest, load_trace, read_trace
from kvgate.sim.workload import Workload

__all__ = [
    "PolicyResult",
    "SimReport",
    "SimSettings",
    "Trace",
    "TraceRequest",
    "Workload",
    "load_trace",
    "read_trace",
    "resolve_policies",
    "simulate",
    "simulate_policy",
]
