"""Misprediction causes: a request predicted to reuse 3 chunks (384 tokens) of a 400-token prompt on
worker w0 (blocks of 16: it can reuse at most 384), and what the worker then reported."""

from __future__ import annotations

import dataclasses

import pytest

from kvgate.gateway.metrics import GatewayMetrics
from kvgate.gateway.misprediction import misprediction
from kvgate.gateway.routing.types import KVSource, Routed, RouteDecision, RouteReason
from kvgate.index.types import LookupResult, PrefixMatch
from kvgate.proto.ids import WorkerId
from kvgate.proto.layout import reusable_tokens
from kvgate.proto.sampling import Usage

W0 = WorkerId("w0")


def routed(tiers: str = "GGG", prompt_tokens: int = 400) -> Routed:
    predicted = min(len(tiers) * 128, prompt_tokens)
    decision = RouteDecision(W0, RouteReason.CACHE_HIT, predicted, len(tiers))
    return Routed(decision, LookupResult(4, {W0: PrefixMatch(W0, tiers)}), 4)


def usage(cached: int, evicted: int = 0, prompt_tokens: int = 400) -> Usage:
    return Usage(prompt_tokens, 1, cached, cached, 0, evicted)


@pytest.mark.parametrize(
    ("tiers", "reported", "expected"),
    [
        pytest.param("GGG", usage(384), None, id="held"),
        pytest.param(
            "GGG", usage(128, evicted=256), ("evicted_since_lookup", 256), id="evicted-while-waiting"
        ),
        pytest.param("GGG", usage(128), ("stale_index", 256), id="gone-before-arrival"),
        pytest.param("GGP", usage(256), ("pending_not_ready", 128), id="pending-not-computed-yet"),
        pytest.param("GPP", usage(0), ("stale_index", 384), id="first-missing-chunk-decides"),
        pytest.param("G", usage(384), ("unknown_to_index", 256), id="more-than-the-index-knew"),
    ],
)
def test_the_first_missing_chunk_decides_the_cause(
    tiers: str, reported: Usage, expected: tuple[str, int] | None
) -> None:
    assert misprediction(routed(tiers), reported, chunk_size=128, block_size=16) == expected


def test_the_prompts_last_block_is_never_a_misprediction() -> None:
    # 384 tokens, all 3 chunks held: the worker recomputes the last block (its last token) and reuses 368
    assert reusable_tokens(384, 16) == 368
    assert misprediction(routed("GGG", 384), usage(368, prompt_tokens=384), 128, 16) is None
    assert misprediction(routed("GGG", 384), usage(352, prompt_tokens=384), 128, 16) == ("stale_index", 16)


def test_fallback_routing_predicts_nothing_and_mispredicts_nothing() -> None:
    fallback = Routed(RouteDecision(W0, RouteReason.FALLBACK, 0), None, 4)
    assert misprediction(fallback, usage(0), 128, 16) is None


def test_the_counter_is_labelled_by_cause() -> None:
    metrics = GatewayMetrics("m", "kvgate", 128)
    metrics.finished(routed(), usage(128, evicted=256), "stop")
    metrics.finished(routed(), usage(0), "stop")
    counts = {
        s.labels["cause"]: s.value
        for family in metrics.registry.collect()
        for s in family.samples
        if s.name == "kvgate_cache_misprediction_tokens_total"
    }
    assert counts == {"evicted_since_lookup": 256, "stale_index": 384}


def test_a_fetched_prefix_is_predicted_and_a_failed_fetch_has_its_own_cause() -> None:
    # w0 holds 1 chunk; the decision names a source holding 3 chunks (384 tokens) of the prompt
    moved = dataclasses.replace(routed("G"), source=KVSource(WorkerId("w1"), 384))
    assert misprediction(moved, usage(384), 128, 16) is None  # fetched: as the decision said
    assert misprediction(moved, usage(128), 128, 16) == ("kv_fetch_short", 256)  # the fetch failed
    assert misprediction(moved, usage(0), 128, 16) == ("stale_index", 128)  # its own chunk was gone


def test_a_source_is_not_counted_as_routed_away() -> None:
    metrics = GatewayMetrics("m", "kvgate", chunk_size=128, block_size=16)
    lookup = LookupResult(4, {W0: PrefixMatch(W0, "G"), WorkerId("w1"): PrefixMatch(WorkerId("w1"), "GGG")})
    decision = RouteDecision(W0, RouteReason.LOAD_OVERRIDE, 128, 1)
    metrics.routed(Routed(decision, lookup, 4))
    metrics.routed(Routed(decision, lookup, 4, source=KVSource(WorkerId("w1"), 384)))
    away = metrics.registry.get_sample_value(
        "kvgate_cache_misprediction_tokens_total", {"cause": "routed_elsewhere_for_load"}
    )
    assert away == 256  # the first decision gave 2 chunks up; the second fetches them
    assert metrics.registry.get_sample_value("kvgate_route_kv_sources_total", {"policy": "kvgate"}) == 1
