"""Optional PNG plots of a :class:`SimReport` (needs matplotlib: ``pip install 'kvgate[bench]'``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any  # matplotlib is optional: its module is passed untyped

from kvgate.sim.results import SimReport


def write_plots(report: SimReport, folder: str | Path) -> list[Path]:
    """Writes ``sim_hit_rate.png`` (hit rate per policy against the references) and
    ``sim_prefill_per_worker.png`` (tokens each worker prefilled) into ``folder`` (created);
    returns the paths. ValueError when matplotlib is not installed."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise ValueError("--plot needs matplotlib: pip install 'kvgate[bench]'") from None
    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    paths = [_hit_rates(plt, report, out / "sim_hit_rate.png"), _per_worker(plt, report, out)]
    plt.close("all")
    return paths


def _hit_rates(plt: Any, report: SimReport, path: Path) -> Path:
    names = list(report.policies)
    fig, ax = plt.subplots(figsize=(8, 4))
    ax.bar(names, [report.policies[n].hit_rate for n in names], color="tab:blue")
    ax.axhline(report.unlimited_hit_rate, color="tab:green", linestyle="--", label="unlimited cache")
    ax.axhline(report.pooled_hit_rate, color="tab:orange", linestyle=":", label="pooled LRU")
    ax.set_ylabel("token hit rate")
    ax.set_title(f"{report.requests} requests, {report.settings['sim']['workers']} workers")
    ax.legend()
    fig.autofmt_xdate()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    return path


def _per_worker(plt: Any, report: SimReport, out: Path) -> Path:
    fig, ax = plt.subplots(figsize=(8, 4))
    for name, result in report.policies.items():
        tokens = result.worker_prefill_tokens
        ax.plot(range(len(tokens)), tokens, marker="o", label=f"{name} ({result.imbalance:.2f})")
    ax.set_xlabel("worker")
    ax.set_ylabel("prefilled tokens")
    ax.set_title("prefill per worker (max/mean in brackets)")
    ax.legend(fontsize="small")
    fig.tight_layout()
    path = out / "sim_prefill_per_worker.png"
    fig.savefig(path, dpi=120)
    return path
