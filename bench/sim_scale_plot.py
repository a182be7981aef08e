"""Plots hit rate and TTFT p99 per policy against cluster size, one row per trace, from the grids
``bench/sim_policies.py`` wrote.

    python bench/sim_scale_plot.py [--results bench/results] [--grids sim_policies_8w,sim_policies_scale,...]
                                   [--capacity 1000000] [--seed 0] [--out bench/results/sim_plots_scale.png]

Reads ``NAME.json`` of each grid and plots every cell of the given capacity and seed (sizes as the
grids ran them: 8 workers at 1x, 64 at 8x, 256 at 32x), for each trace that has two sizes or more.
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path

Cells = dict[str, dict[int, dict[str, dict[str, float]]]]  # trace -> workers -> policy -> figures
GRIDS = (
    "sim_policies_8w",
    "sim_policies_scale_s0",
    "sim_policies_mooncake_conv",
    "sim_policies_mooncake_conv_scale",
)
"""The grids plotted by default: five traces and Mooncake's conversation trace at 8, 64 and 256 workers."""


def read_cells(results: Path, grids: list[str], capacity: int, seed: int) -> Cells:
    """The cells of ``grids`` at ``capacity`` tokens per worker and ``seed``."""
    cells: Cells = defaultdict(dict)
    for grid in grids:
        for row in json.loads((results / f"{grid}.json").read_text())["rows"]:
            if row["capacity"] == capacity and row["seed"] == seed:
                cells[row["trace"]][row["workers"]] = row["policies"]
    return {trace: sizes for trace, sizes in cells.items() if len(sizes) >= 2}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=Path, default=Path("bench/results"))
    parser.add_argument("--grids", default=",".join(GRIDS))
    parser.add_argument("--capacity", type=int, default=1_000_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=Path("bench/results/sim_plots_scale.png"))
    args = parser.parse_args()
    cells = read_cells(args.results, args.grids.split(","), args.capacity, args.seed)
    if not cells:
        raise SystemExit("no trace has cells at two sizes in those grids")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(len(cells), 2, figsize=(11, 3.6 * len(cells)), squeeze=False)
    for (hit, ttft), (trace, by_size) in zip(axes, sorted(cells.items()), strict=True):
        sizes = sorted(by_size)
        for policy in by_size[sizes[0]]:
            hit.plot(sizes, [by_size[n][policy]["hit_rate"] for n in sizes], marker="o", label=policy)
            ttft.plot(sizes, [by_size[n][policy]["ttft_p99_s"] for n in sizes], marker="o", label=policy)
        for ax, label in ((hit, "token hit rate"), (ttft, "TTFT p99 (s)")):
            ax.set_xscale("log", base=2)
            ax.set_xticks(sizes, [str(n) for n in sizes])
            ax.set_xlabel("workers (trace sped up with the cluster)")
            ax.set_ylabel(label)
            ax.set_title(f"{trace}, {args.capacity:,} tokens/worker, seed {args.seed}")
        ttft.set_yscale("log")
    axes[0][0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(args.out, dpi=100)
    print(args.out)


if __name__ == "__main__":
    main()
