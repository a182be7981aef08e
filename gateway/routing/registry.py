"""Policies by name, so benchmarks, the simulator and the CLI pick them with a string."""

from __future__ import annotations

from collections.abc import Callable

from kvgate.gateway.routing.baselines import LeastLoaded, PowerOfTwo, RandomChoice, RoundRobin
from kvgate.gateway.routing.config import RoutingConfig
from kvgate.gateway.routing.kvgate_policy import KvgatePolicy
from kvgate.gateway.routing.peers.dynamo import DynamoKv
from kvgate.gateway.routing.peers.llmd import LlmdPrecise
from kvgate.gateway.routing.peers.ray_serve import RayServePrefixAffinity
from kvgate.gateway.routing.peers.sglang import SGLangCacheAware
from kvgate.gateway.routing.prefix_affinity import PrefixAffinity
from kvgate.gateway.routing.types import RoutingPolicy

_POLICIES: dict[str, Callable[[RoutingConfig], RoutingPolicy]] = {
    "kvgate": KvgatePolicy,
    "sglang_cache_aware": SGLangCacheAware,
    "ray_serve_prefix": RayServePrefixAffinity,
    "dynamo_kv": DynamoKv,
    "llmd_precise": LlmdPrecise,
    "prefix_affinity": PrefixAffinity,
    "least_loaded": LeastLoaded,
    "power_of_two": PowerOfTwo,
    "round_robin": RoundRobin,
    "random": RandomChoice,
}


PEER_POLICIES = ("sglang_cache_aware", "ray_serve_prefix", "dynamo_kv", "llmd_precise")
"""The names of the peers' routers (:mod:`.peers`), in :func:`policy_names`' order."""


def policy_names() -> tuple[str, ...]:
    """Every name :func:`get_policy` accepts; the default first, then the peers' routers
    (:mod:`.peers`), then kvgate's own baselines."""
    return tuple(_POLICIES)


def get_policy(name: str, config: RoutingConfig | None = None) -> RoutingPolicy:
    """A policy instance; ValueError naming the known policies for an unknown name."""
    try:
        factory = _POLICIES[name]
    except KeyError:
        raise ValueError(f"unknown routing policy {name!r}; known: {', '.join(_POLICIES)}") from None
    return factory(config or RoutingConfig())
