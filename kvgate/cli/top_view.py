"""What ``kvgate top`` shows, computed from a gateway's /metrics text (pure functions, tested alone)."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from prometheus_client.parser import text_string_to_metric_families

from kvgate.gateway.metrics import bucket_quantile as quantile


@dataclass
class Snapshot:
    """Cumulative figures at one scrape."""

    prompt: dict[str, float] = field(default_factory=lambda: defaultdict(float))  # worker -> tokens
    cached: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    reasons: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    ttft_buckets: dict[float, float] = field(default_factory=dict)  # le -> cumulative count
    errors: float = 0.0
    degraded: bool = False
    mispredicted: dict[str, float] = field(default_factory=lambda: defaultdict(float))  # cause -> tokens
    cache_misses: dict[str, float] = field(
        default_factory=lambda: defaultdict(float)
    )  # diagnosed cause -> tokens
    # worker -> (tier, state) -> blocks, and worker -> cause -> blocks, from the workers' heartbeats
    blocks: dict[str, dict[tuple[str, str], float]] = field(default_factory=lambda: defaultdict(dict))
    evicted: dict[str, dict[str, float]] = field(default_factory=lambda: defaultdict(dict))


def parse(text: str) -> Snapshot:
    snap = Snapshot()
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            _take(snap, s.name, s.labels, s.value)
    return snap


def _take(snap: Snapshot, name: str, labels: dict[str, str], value: float) -> None:
    if name == "kvgate_prompt_tokens_total":
        snap.prompt[labels["worker"]] += value
    elif name == "kvgate_cached_prompt_tokens_total":
        snap.cached[labels["worker"]] += value
    elif name == "kvgate_route_decisions_total":
        snap.reasons[labels["reason"]] += value
    elif name == "kvgate_time_to_first_token_seconds_bucket":
        le = float(labels["le"])
        snap.ttft_buckets[le] = snap.ttft_buckets.get(le, 0.0) + value
    elif name == "kvgate_request_errors_total":
        snap.errors += value
    elif name == "kvgate_index_degraded":
        snap.degraded = value >= 1
    elif name == "kvgate_cache_misprediction_tokens_total":
        snap.mispredicted[labels["cause"]] += value
    elif name == "kvgate_cache_miss_tokens_total":
        snap.cache_misses[labels["cause"]] += value
    else:
        _take_worker_load(snap, name, labels, value)


def _take_worker_load(snap: Snapshot, name: str, labels: dict[str, str], value: float) -> None:
    if name == "kvgate_upstream_blocks":
        snap.blocks[labels["worker"]][(labels["tier"], labels["state"])] = value
    elif name == "kvgate_upstream_evicted_blocks_total":
        snap.evicted[labels["worker"]][labels["cause"]] = value
    elif name == "kvgate_upstream_offloaded_blocks_total":
        snap.evicted[labels["worker"]]["offload"] = value


def render(now: Snapshot, before: Snapshot | None, url: str) -> str:
    """The screen: overall and per-worker hit rate (since start and over the last interval), TTFT,
    route reasons, mispredictions by cause, missed tokens by diagnosed cause, and each worker's KV
    tiers and evictions."""
    base = before or Snapshot()
    lines = [f"kvgate top  {url}" + ("   INDEX DEGRADED: load-based routing" if now.degraded else ""), ""]
    lines.append(f"{'worker':<22}{'prompt tok':>12}{'cached tok':>12}{'hit rate':>10}{'recent':>9}")
    for worker in [*sorted(now.prompt), "(all)"]:
        lines.append(_row(worker, now, base))
    p50, p99 = quantile(now.ttft_buckets, 0.5), quantile(now.ttft_buckets, 0.99)
    fmt = lambda v: "-" if v is None else f"<={v:g}s"  # noqa: E731
    lines += [
        "",
        f"TTFT p50 {fmt(p50)}  p99 {fmt(p99)}   errors {now.errors:.0f}",
        "routes  " + "  ".join(f"{r} {v:.0f}" for r, v in sorted(now.reasons.items())),
        "missed  " + "  ".join(f"{c} {v:.0f}" for c, v in sorted(now.mispredicted.items()) if v),
        "miss causes  " + "  ".join(f"{c} {v:.0f}" for c, v in sorted(now.cache_misses.items()) if v),
    ]
    if now.blocks:
        lines += ["", f"{'worker':<22}{'GPU used':>10}{'cached':>8}{'free':>8}{'CPU held':>10}"
                  f"{'evicted ttl':>13}{'pressure':>10}{'offload':>9}"]  # fmt: skip
        lines += [_tiers(worker, now, base) for worker in sorted(now.blocks)]
    return "\n".join(lines)


_EVICTION_COLUMNS = (("ttl", 13), ("pressure", 10), ("offload", 9))


def _tiers(worker: str, now: Snapshot, base: Snapshot) -> str:
    """Shares of each tier's blocks, and blocks evicted over the last interval (since start without
    one; a worker's counters restart at 0 with a new epoch, which reads as the new count)."""
    blocks = now.blocks[worker]

    def share(tier: str, state: str) -> str:
        total = sum(v for (t, _), v in blocks.items() if t == tier)
        return f"{blocks.get((tier, state), 0.0) / total:.0%}" if total else "-"

    def evicted(cause: str) -> str:
        count, before = now.evicted[worker].get(cause, 0.0), base.evicted.get(worker, {}).get(cause, 0.0)
        return f"{count - before if count >= before else count:.0f}"

    gpu = f"{share('gpu', 'used'):>10}{share('gpu', 'cached'):>8}{share('gpu', 'free'):>8}"
    counts = "".join(f"{evicted(cause):>{width}}" for cause, width in _EVICTION_COLUMNS)
    return f"{worker:<22}{gpu}{share('cpu', 'cached'):>10}{counts}"


def _row(worker: str, now: Snapshot, base: Snapshot) -> str:
    def total(snap: Snapshot, which: str) -> float:
        table = getattr(snap, which)
        return sum(table.values()) if worker == "(all)" else table.get(worker, 0.0)

    prompt, cached = total(now, "prompt"), total(now, "cached")
    d_prompt, d_cached = prompt - total(base, "prompt"), cached - total(base, "cached")
    rate = f"{cached / prompt:.1%}" if prompt else "-"
    recent = f"{d_cached / d_prompt:.1%}" if d_prompt else "-"
    return f"{worker:<22}{prompt:>12.0f}{cached:>12.0f}{rate:>10}{recent:>9}"
