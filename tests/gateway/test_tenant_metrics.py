"""Per-tenant usage counters: a gateway whose key file names acme and beta has exactly the label values
acme, beta and anonymous, all at zero from the start; a name outside them counts under anonymous and
adds no series."""

from __future__ import annotations

from kvgate.gateway.metrics import GatewayMetrics
from kvgate.gateway.routing.types import Routed, RouteDecision, RouteReason
from kvgate.proto.ids import WorkerId
from kvgate.proto.sampling import Usage

FAMILIES = ("kvgate_tenant_prompt_tokens", "kvgate_tenant_cached_prompt_tokens", "kvgate_tenant_requests")
ROUTED = Routed(RouteDecision(WorkerId("w0"), RouteReason.CACHE_HIT, 0), None, 4)


def by_tenant(metrics: GatewayMetrics) -> dict[str, dict[str, float]]:
    """Each family's value per ``tenant`` label value."""
    counts: dict[str, dict[str, float]] = {name: {} for name in FAMILIES}
    for family in metrics.registry.collect():
        for sample in family.samples:
            if family.name in counts and sample.name == family.name + "_total":
                counts[family.name][sample.labels["tenant"]] = sample.value
    return counts


def usage(prompt: int, gpu: int, cpu: int = 0) -> Usage:
    return Usage(prompt, 1, gpu + cpu, gpu, cpu)


def test_the_configured_tenants_and_anonymous_are_there_at_zero_before_any_request() -> None:
    counts = by_tenant(GatewayMetrics("m", "kvgate", 128, tenants=["acme", "beta"]))
    for name in FAMILIES:
        assert counts[name] == {"acme": 0.0, "beta": 0.0, "anonymous": 0.0}, name


def test_a_gateway_without_keys_has_only_anonymous() -> None:
    metrics = GatewayMetrics("m", "kvgate", 128)
    metrics.finished(ROUTED, usage(300, 256), "stop", "anonymous")
    counts = by_tenant(metrics)
    assert counts["kvgate_tenant_prompt_tokens"] == {"anonymous": 300.0}
    assert counts["kvgate_tenant_cached_prompt_tokens"] == {"anonymous": 256.0}
    assert counts["kvgate_tenant_requests"] == {"anonymous": 1.0}


def test_each_tenant_counts_its_own_usage_every_tier_cached() -> None:
    metrics = GatewayMetrics("m", "kvgate", 128, tenants=["acme", "beta"])
    metrics.finished(ROUTED, usage(400, 256, 128), "stop", "acme")
    metrics.finished(ROUTED, usage(200, 128), "length", "acme")
    metrics.finished(ROUTED, usage(50, 0), "stop", "beta")
    counts = by_tenant(metrics)
    assert counts["kvgate_tenant_prompt_tokens"] == {"acme": 600.0, "beta": 50.0, "anonymous": 0.0}
    assert counts["kvgate_tenant_cached_prompt_tokens"] == {"acme": 512.0, "beta": 0.0, "anonymous": 0.0}
    assert counts["kvgate_tenant_requests"] == {"acme": 2.0, "beta": 1.0, "anonymous": 0.0}


def test_names_outside_the_key_file_add_no_label_and_count_under_anonymous() -> None:
    metrics = GatewayMetrics("m", "kvgate", 128, tenants=["acme", "beta"])
    claimed = ["mallory", "", "tenant:acme", "ACME", "acme ", "x" * 10_000] + [f"t{i}" for i in range(100)]
    for name in claimed:
        metrics.finished(ROUTED, usage(10, 5), "stop", name)
    counts = by_tenant(metrics)
    for name in FAMILIES:
        assert set(counts[name]) == {"acme", "beta", "anonymous"}, name
    n = len(claimed)
    assert counts["kvgate_tenant_prompt_tokens"] == {"acme": 0.0, "beta": 0.0, "anonymous": 10.0 * n}
    assert counts["kvgate_tenant_cached_prompt_tokens"] == {"acme": 0.0, "beta": 0.0, "anonymous": 5.0 * n}
    assert counts["kvgate_tenant_requests"] == {"acme": 0.0, "beta": 0.0, "anonymous": n}
