"""Plots hit rate and TTFT p99 per policy against cluster size, from the tables `kvgate simulate` wrote.

    python bench/sim_scale_plot.py [--results bench/results] [--out bench/results/sim_plots_scale.png]

Reads ``sim_mooncake_8w.txt``, ``sim_mooncake_64w_speed8.txt`` and ``sim_mooncake_256w_speed32.txt``.
"""

from __future__ import annotations

import argparse
from pathlib import Path

TABLES = {8: "sim_mooncake_8w.txt", 64: "sim_mooncake_64w_speed8.txt", 256: "sim_mooncake_256w_speed32.txt"}


def read_table(path: Path) -> dict[str, dict[str, float]]:
    """policy -> {hit_rate, imbalance, ttft_p99_s} from a `kvgate simulate` table."""
    rows: dict[str, dict[str, float]] = {}
    lines = path.read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("policy"))
    for line in lines[start + 1 :]:
        cells = line.split()
        if len(cells) >= 6:
            rows[cells[0]] = {
                "hit_rate": float(cells[1]),
                "imbalance": float(cells[3]),
                "ttft_p99_s": float(cells[5]),
            }
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=Path, default=Path("bench/results"))
    parser.add_argument("--out", type=Path, default=Path("bench/results/sim_plots_scale.png"))
    args = parser.parse_args()
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    tables = {n: read_table(args.results / name) for n, name in TABLES.items()}
    policies = list(tables[8])
    fig, (hit, ttft) = plt.subplots(1, 2, figsize=(11, 4))
    for policy in policies:
        sizes = [n for n in TABLES if policy in tables[n]]
        hit.plot(sizes, [tables[n][policy]["hit_rate"] for n in sizes], marker="o", label=policy)
        ttft.plot(sizes, [tables[n][policy]["ttft_p99_s"] for n in sizes], marker="o", label=policy)
    for ax, label in ((hit, "token hit rate"), (ttft, "TTFT p99 (s)")):
        ax.set_xscale("log", base=2)
        ax.set_xticks(list(TABLES), [str(n) for n in TABLES])
        ax.set_xlabel("workers (trace sped up 1x / 8x / 32x)")
        ax.set_ylabel(label)
    ttft.set_yscale("log")
    hit.legend(fontsize=8)
    fig.suptitle("Mooncake synthetic trace: policies vs cluster size (kvgate simulate)")
    fig.tight_layout()
    fig.savefig(args.out, dpi=110)
    print(args.out)


if __name__ == "__main__":
    main()
