"""Summary of a live benchmark run."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kvgate.loadgen.runner import Outcome


def percentile(values: Sequence[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def summarize(outcomes: Sequence[Outcome], wall_s: float) -> dict[str, Any]:
    """TTFT p50/p99 (s), output tokens/s, cached-token fraction (cached / prompt tokens), errors."""
    ok = [o for o in outcomes if o.error is None]
    ttfts = [o.ttft_s for o in ok if o.ttft_s is not None]
    prompt = sum(o.prompt_tokens for o in ok)
    return {
        "requests": len(outcomes),
        "ok": len(ok),
        "errors": len(outcomes) - len(ok),
        "error_samples": sorted({o.error for o in outcomes if o.error})[:3],
        "ttft_p50_s": percentile(ttfts, 0.5),
        "ttft_p99_s": percentile(ttfts, 0.99),
        "latency_p50_s": percentile([o.latency_s for o in ok], 0.5),
        "output_tokens_per_s": sum(o.completion_tokens for o in ok) / wall_s if wall_s > 0 else 0.0,
        "cached_fraction": sum(o.cached_tokens for o in ok) / prompt if prompt else 0.0,
        "prompt_tokens": prompt,
        "wall_s": wall_s,
    }


def table(summary: dict[str, Any]) -> str:
    def fmt(value: float | None) -> str:
        return "-" if value is None else f"{value:.3f}"

    counts = f"ok {summary['ok']}, errors {summary['errors']}"
    lines = [
        f"requests {summary['requests']} ({counts}) in {summary['wall_s']:.1f} s",
        f"TTFT p50 {fmt(summary['ttft_p50_s'])} s   p99 {fmt(summary['ttft_p99_s'])} s",
        f"output {summary['output_tokens_per_s']:.1f} tokens/s   "
        f"cached fraction {summary['cached_fraction']:.3f}",
    ]
    return "\n".join(lines + [f"error: {e}" for e in summary["error_samples"]])
