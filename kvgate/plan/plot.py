"""The sweep as a PNG: hit rate (and TTFT p99) against workers, one line per KV dtype (needs matplotlib)."""

from __future__ import annotations

from pathlib import Path

from kvgate.plan.search import Sweep, label


def write_plot(sweep: Sweep, path: str | Path) -> Path:
    """Writes the plot to ``path`` (its folder created); ValueError without matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise ValueError("--plot needs matplotlib: pip install 'kvgate[bench]'") from None
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig, (hits, p99) = plt.subplots(1, 2, figsize=(10, 4))
    names = dict.fromkeys(label(c) for c in sweep.candidates)
    for name, marker, style in zip(names, "osD^v" * 4, ["-", "--", ":", "-."] * 5, strict=False):
        rows = [c for c in sweep.candidates if label(c) == name]
        workers = [c.workers for c in rows]  # fp8 draws over int8 when their tiers are equal: dashed
        hits.plot(workers, [c.hit_rate for c in rows], marker=marker, linestyle=style, label=name)
        p99.plot(workers, [c.ttft_p99_s for c in rows], marker=marker, linestyle=style, label=name)
    if sweep.target.hit_rate is not None:
        hits.axhline(sweep.target.hit_rate, color="grey", linestyle="--", label="target")
    if sweep.target.ttft_p99_s is not None:
        p99.axhline(sweep.target.ttft_p99_s, color="grey", linestyle="--", label="target")
    for ax, ylabel in ((hits, "token hit rate"), (p99, "TTFT p99 (s)")):
        ax.set_xlabel("workers")
        ax.set_xticks(sorted({c.workers for c in sweep.candidates}))
        ax.set_ylabel(ylabel)
        ax.legend()
    fig.suptitle(f"kvgate plan: {sweep.policy} policy at fixed memory per worker")
    fig.tight_layout()
    fig.savefig(out, dpi=120)
    plt.close(fig)
    return out
