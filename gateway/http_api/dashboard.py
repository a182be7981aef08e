"""The live dashboard: ``/dashboard`` (a page with charts, refreshing itself) and ``/dashboard/data``
(the figures it plots, as JSON). Static files are vendored in ``static/``: nothing loads from a CDN."""

from __future__ import annotations

import time
from collections import defaultdict
from importlib.resources import files
from typing import Any

from fastapi import APIRouter
from fastapi.responses import HTMLResponse, Response

from kvgate.gateway.metrics import GatewayMetrics, bucket_quantile
from kvgate.gateway.upstream.directory import WorkerDirectory
from kvgate.gateway.worker_load_metrics import tier_blocks
from kvgate.proto.workers import WorkerLoad

STATIC = files("kvgate.gateway.http_api") / "static"
_TYPES = {".js": "text/javascript", ".css": "text/css", ".html": "text/html", ".svg": "image/svg+xml"}
_ASSETS = ("dashboard.js", "dashboard.css", "favicon.svg", "vendor/uplot/uPlot.iife.min.js",
           "vendor/uplot/uPlot.min.css")  # fmt: skip


def build_dashboard_router(
    metrics: GatewayMetrics, directory: WorkerDirectory, *, diagnosis_enabled: bool = True
) -> APIRouter:
    """Serves ``/dashboard``, its assets, its data and the site's ``/favicon.ico``. The page and its
    assets are read once, here (no file I/O on the event loop per request). The figures the page plots
    are also on ``/metrics`` (for ``kvgate top``): this makes ``metrics`` export the live workers'
    reported KV tiers and evictions too (:meth:`GatewayMetrics.watch_workers`).
    ``diagnosis_enabled``: whether cache-miss diagnosis runs (the page says so when it does not)."""
    metrics.watch_workers(directory.live)
    router = APIRouter()
    html = (STATIC / "dashboard.html").read_text()
    assets = {path: (STATIC / path).read_bytes() for path in _ASSETS}

    @router.get("/dashboard", response_class=HTMLResponse)
    async def page() -> HTMLResponse:
        return HTMLResponse(html)

    @router.get("/dashboard/static/{path:path}")
    async def asset(path: str) -> Response:
        if path not in assets:  # a fixed list: no path traversal, no directory listing
            return Response(status_code=404)
        return Response(assets[path], media_type=_TYPES[path[path.rfind(".") :]])

    @router.get("/favicon.ico", include_in_schema=False)
    async def favicon() -> Response:  # what browsers ask of any page's host: not a 404 in the log
        return Response(assets["favicon.svg"], media_type=_TYPES[".svg"])

    @router.get("/dashboard/data")
    async def data() -> dict[str, Any]:
        return dashboard_data(metrics, directory, diagnosis_enabled=diagnosis_enabled)

    return router


def dashboard_data(
    metrics: GatewayMetrics, directory: WorkerDirectory, *, diagnosis_enabled: bool = True
) -> dict[str, Any]:
    """Cumulative figures now; the page turns successive answers into rates and time series.
    ``diagnosis``: whether cache-miss diagnosis runs, and the reusable prompt tokens missed so far by
    diagnosed cause (every cause, 0 included: ``kvgate_cache_miss_tokens_total``)."""
    samples = _samples(metrics)
    workers = _workers(samples, directory)
    ttft = samples["ttft"]
    return {
        "time": time.time(),
        "degraded": directory.degraded,
        "workers": workers,
        "totals": {k: sum(w[k] for w in workers) for k in ("prompt_tokens", "cached_tokens", "predicted")},
        "reasons": dict(samples["reasons"]),
        "mispredicted": dict(samples["mispredicted"]),
        "diagnosis": {"enabled": diagnosis_enabled, "missed": dict(samples["missed"])},
        "ttft": {
            "p50": bucket_quantile(ttft, 0.5),
            "p99": bucket_quantile(ttft, 0.99),
            "count": max(ttft.values(), default=0),
        },
        "errors": samples["errors"],
    }


def _samples(metrics: GatewayMetrics) -> dict[str, Any]:
    out: dict[str, Any] = {
        "prompt": defaultdict(float),
        "gpu": defaultdict(float),
        "cpu": defaultdict(float),
        "predicted": defaultdict(float),
        "reasons": defaultdict(float),
        "mispredicted": defaultdict(float),
        "missed": defaultdict(float),
        "ttft": defaultdict(float),
        "errors": 0.0,
    }
    for family in metrics.registry.collect():
        for s in family.samples:
            _take(out, s.name, s.labels, s.value)
    return out


def _take(out: dict[str, Any], name: str, labels: dict[str, str], value: float) -> None:
    if name == "kvgate_prompt_tokens_total":
        out["prompt"][labels["worker"]] += value
    elif name == "kvgate_cached_prompt_tokens_total":
        out[labels["tier"]][labels["worker"]] += value
    elif name == "kvgate_predicted_cached_tokens_total":
        out["predicted"][labels["worker"]] += value
    elif name == "kvgate_route_decisions_total":
        out["reasons"][labels["reason"]] += value
    elif name == "kvgate_cache_misprediction_tokens_total":
        out["mispredicted"][labels["cause"]] += value
    elif name == "kvgate_cache_miss_tokens_total":
        out["missed"][labels["cause"]] += value
    elif name == "kvgate_time_to_first_token_seconds_bucket":
        out["ttft"][float(labels["le"])] += value
    elif name == "kvgate_request_errors_total":
        out["errors"] += value


def _workers(samples: dict[str, Any], directory: WorkerDirectory) -> list[dict[str, Any]]:
    live = {w.info.worker_id: w for w in directory.live()}
    rows = []
    for worker in sorted(set(live) | set(samples["prompt"])):
        status = live.get(worker)
        load = status.load if status else None
        rows.append(
            {
                "worker": worker,
                "live": status is not None,
                "prompt_tokens": samples["prompt"][worker],
                "cached_tokens": samples["gpu"][worker] + samples["cpu"][worker],
                "cached_gpu": samples["gpu"][worker],
                "cached_cpu": samples["cpu"][worker],
                "predicted": samples["predicted"][worker],
                "gpu_usage": load.kv_usage if load else None,
                "cpu_usage": (1 - load.cpu_blocks_free / load.cpu_blocks_total)
                if load and load.cpu_blocks_total
                else None,
                "running": load.running_seqs if load else 0,
                "waiting": load.waiting_seqs if load else 0,
                **_cache_state(load),
            }
        )
    return rows


def _cache_state(load: WorkerLoad | None) -> dict[str, Any]:
    """``blocks``: tier -> state -> blocks, as of the last heartbeat (see :func:`tier_blocks`);
    ``evicted``: cumulative blocks by cause in the worker's epoch (offload: GPU -> CPU moves)."""
    if load is None:
        return {"blocks": {}, "evicted": {}}
    blocks: dict[str, dict[str, int]] = defaultdict(dict)
    for tier, state, value in tier_blocks(load):
        blocks[tier][state] = value
    evicted = {
        "ttl": load.evicted_ttl_blocks,
        "pressure": load.evicted_pressure_blocks,
        "offload": load.offloaded_blocks,
    }
    return {"blocks": dict(blocks), "evicted": evicted}
