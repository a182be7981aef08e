"""The simulator's table says where kvgate's policy stands: its hit rate against the best peer's
and the pooled cache's, its TTFT p99 against the fastest other policy's and peer's."""

from __future__ import annotations

import dataclasses

from kvgate.sim.report import format_table
from kvgate.sim.results import PolicyResult, SimReport


def _result(hit: float, p99: float) -> PolicyResult:
    return PolicyResult(
        hit_rate=hit, imbalance=1.0, ttft_p50_s=0.1, ttft_p99_s=p99, ttft_mean_s=0.2, queue_p99_s=0.0,
        cpu_hit_rate=0.0, prediction_error=0.0, ttft_estimate_bias_s=None, reasons={}, evictions={},
    )  # fmt: skip


def _report(**policies: PolicyResult) -> SimReport:
    settings = {"sim": {"workers": 8, "capacity_tokens": 1000, "cpu_capacity_tokens": 0, "speed": 1.0}}
    return SimReport(10, 1000, 0.6, 0.5, dict(policies), settings)


def _standing(report: SimReport) -> list[str]:
    table = format_table(report)
    if "kvgate against the others:" not in table:
        return []
    return table.split("kvgate against the others:\n")[1].split("\n\n")[0].splitlines()


def test_kvgate_is_set_against_the_best_peer_the_pooled_cache_and_the_fastest_other() -> None:
    report = _report(
        kvgate=_result(0.49, 5.0),
        sglang_cache_aware=_result(0.495, 6.0),
        ray_serve_prefix=_result(0.40, 5.5),
        least_loaded=_result(0.10, 4.5),
    )
    hit, p99 = _standing(report)
    assert hit == "  hit rate 0.4900, 0.980x pooled; best peer sglang_cache_aware 0.4950 (-0.0050)"
    assert p99 == "  TTFT p99 5.00 s; best other least_loaded 4.50 s; best peer ray_serve_prefix 5.50 s"


def test_without_peers_only_the_pooled_cache_and_the_others_are_named() -> None:
    hit, p99 = _standing(_report(kvgate=_result(0.55, 5.0), random=_result(0.1, 9.0)))
    assert hit == "  hit rate 0.5500, 1.100x pooled"
    assert p99 == "  TTFT p99 5.00 s; best other random 9.00 s"


def test_nothing_is_said_unless_kvgate_ran_beside_another_policy() -> None:
    assert _standing(_report(kvgate=_result(0.5, 5.0))) == []
    assert _standing(_report(least_loaded=_result(0.1, 5.0), random=_result(0.1, 6.0))) == []


def test_the_share_fetched_from_kv_sources_is_reported_where_there_is_one() -> None:
    fetching = dataclasses.replace(_result(0.55, 5.0), fetch_rate=0.0031)
    table = format_table(_report(kvgate=fetching, least_loaded=_result(0.1, 5.0)))
    line = "fetched from a KV source (share of prompt tokens, in the hit rate): kvgate 0.0031"
    assert line in table.splitlines()
    assert "fetched from a KV source" not in format_table(_report(kvgate=_result(0.55, 5.0)))
