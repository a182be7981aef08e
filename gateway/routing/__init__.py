"""Routing: pick the worker for a request from index matches and worker loads.

Every policy is a pure function of its input (:class:`RouteRequest`) and its frozen config, so
policies are table-tested and replayed by the simulator exactly as the gateway runs them.
"""

from kvgate.gateway.routing.registry import PEER_POLICIES, get_policy, policy_names
from kvgate.gateway.routing.types import Candidate, RouteDecision, RouteReason, RouteRequest, RoutingPolicy

__all__ = [
    "PEER_POLICIES",
    "Candidate",
    "RouteDecision",
    "RouteReason",
    "RouteRequest",
    "RoutingPolicy",
    "get_policy",
    "policy_names",
]
