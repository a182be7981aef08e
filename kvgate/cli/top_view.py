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


def render(now: Snapshot, before: Snapshot | None, url: str) -> str:
    """The screen: overall and per-worker hit rate (since start and over the last interval)."""
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
    ]
    return "\n".join(lines)


def _row(worker: str, now: Snapshot, base: Snapshot) -> str:
    def total(snap: Snapshot, which: str) -> float:
        table = getattr(snap, which)
        return sum(table.values()) if worker == "(all)" else table.get(worker, 0.0)

    prompt, cached = total(now, "prompt"), total(now, "cached")
    d_prompt, d_cached = prompt - total(base, "prompt"), cached - total(base, "cached")
    rate = f"{cached / prompt:.1%}" if prompt else "-"
    recent = f"{d_cached / d_prompt:.1%}" if d_prompt else "-"
    return f"{worker:<22}{prompt:>12.0f}{cached:>12.0f}{rate:>10}{recent:>9}"
