"""The Grafana dashboard and the alert rules query metrics that exist: the gateway's and the worker
exporter's, read from their own collectors."""

from __future__ import annotations

import json
import re
from pathlib import Path

import yaml

from kvgate.gateway.metrics import GatewayMetrics
from kvgate.workers.service.engine_stats import EngineStats
from kvgate.workers.service.metrics import WorkerCollector

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
BUILTIN = {"up"}


def gateway_metric_names() -> set[str]:
    suffixes = {"counter": ("_total",), "histogram": ("_bucket", "_count", "_sum"), "gauge": ("",)}
    families = [
        *GatewayMetrics("m", "kvgate", 128).registry.collect(),
        *WorkerCollector("w", EngineStats, 0).collect(),
    ]
    return {family.name + suffix for family in families for suffix in suffixes[family.type]}


def metric_names(expr: str) -> set[str]:
    return {m for m in re.findall(r"\b(kvgate_[a-z_]+|up)\b", expr)}


def dashboard_exprs() -> list[str]:
    dash = json.loads((DEPLOY / "grafana" / "kvgate-dashboard.json").read_text())
    return [t["expr"] for p in dash["panels"] for t in p["targets"]]


def alert_exprs() -> list[str]:
    rules = yaml.safe_load((DEPLOY / "prometheus" / "alerts.yml").read_text())
    return [r["expr"] for g in rules["groups"] for r in g["rules"]]


def test_every_queried_metric_exists() -> None:
    known = gateway_metric_names() | BUILTIN
    for expr in dashboard_exprs() + alert_exprs():
        assert metric_names(expr) <= known, expr


def test_the_dashboard_shows_hit_rates_and_latencies() -> None:
    dash = json.loads((DEPLOY / "grafana" / "kvgate-dashboard.json").read_text())
    titles = {p["title"] for p in dash["panels"]}
    assert {"Token hit rate (overall)", "Token hit rate per worker", "TTFT"} <= titles
    assert {"Mispredicted cached tokens / s by cause", "Evicted blocks / s by cause (workers)"} <= titles
    assert len({p["id"] for p in dash["panels"]}) == len(dash["panels"])


def test_the_dashboard_charts_missed_tokens_by_diagnosed_cause() -> None:
    dash = json.loads((DEPLOY / "grafana" / "kvgate-dashboard.json").read_text())
    panels = [
        p for p in dash["panels"] if any("kvgate_cache_miss_tokens_total" in t["expr"] for t in p["targets"])
    ]
    assert [p["title"] for p in panels] == ["Missed prompt tokens / s by diagnosed cause"]
    [target] = panels[0]["targets"]
    assert target["expr"] == "sum by (cause) (rate(kvgate_cache_miss_tokens_total[5m]))"
    assert target["legendFormat"] == "{{cause}}"
    assert "cause" in GatewayMetrics("m", "kvgate", 128).cache_miss._labelnames  # the label it sums by
    assert "diagnosis is off" in panels[0]["description"]  # why it can be all zeros


def test_alert_rules_cover_the_failure_modes() -> None:
    rules = yaml.safe_load((DEPLOY / "prometheus" / "alerts.yml").read_text())
    names = {r["alert"] for g in rules["groups"] for r in g["rules"]}
    assert {
        "KvgateHitRateDropped",
        "KvgateWorkerDown",
        "KvgateIndexDegraded",
        "KvgateKvPoolExhausted",
    } <= names
