"""kvgate's policy alone, with routing settings changed, against its defaults, cell by cell.

    python bench/sim_knob.py --set KEY=VALUE [--set KEY=VALUE ...] [--traces synthetic,chat,...]
                             [--sizes 8x1,64x8] [--capacities 1000000,300000] [--seeds 0,1,2]
                             [--jobs 2] [--out bench/results] [--name sim_knob] [--recorded NAME=PATH]

What a setting of ``RoutingConfig`` changes, before it is a default: each cell (trace, workers x
speed, GPU tokens per worker, seed; the traces as ``bench/sim_policies.py`` makes or reads them) runs
``kvgate simulate TRACE --policy kvgate --workers W --speed S --capacity-tokens C --seed N --json``
twice in subprocesses, as the defaults have it and with every ``--routing-config KEY=VALUE`` given
here. The peers' routers are not run: no setting of kvgate's cost model changes them
(``bench/sim_policies.py`` compares kvgate with them). Writes ``NAME.json`` (both runs of every cell)
and ``NAME.md`` (per cell: hit rate, imbalance and TTFT p99 both ways, and how many cells each way
is ahead).
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.gateway import _commit
from bench.sim_policies import KEYS, add_grid_arguments, grid_cells, simulate


def _run(path: str, cell: tuple[int, float, int, int], settings: list[str]) -> dict[str, float]:
    policy = simulate(path, cell, "kvgate", settings)["policies"]["kvgate"]
    return {k: round(policy[k], 4) for k in KEYS}


def _cell(trace: str, path: str, cell: tuple[int, float, int, int], settings: list[str]) -> dict:
    workers, speed, capacity, seed = cell
    row = {"trace": trace, "workers": workers, "speed": speed, "capacity": capacity, "seed": seed,
           "default": _run(path, cell, []), "set": _run(path, cell, settings)}  # fmt: skip
    a, b = row["default"], row["set"]
    print(f"{trace} {workers}w x{speed:g} {capacity:,} seed {seed}: hit {a['hit_rate']:.4f} -> "
          f"{b['hit_rate']:.4f}, p99 {a['ttft_p99_s']:.2f} -> {b['ttft_p99_s']:.2f}",
          file=sys.stderr, flush=True)  # fmt: skip
    return row


def _lines(rows: list[dict], settings: list[str]) -> list[str]:
    lines = [
        f"| trace | workers x speed | tokens/worker | seed | hit rate: default -> {' '.join(settings)} "
        "| imbalance | TTFT p99 (s) |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        a, b = r["default"], r["set"]
        lines.append(
            f"| {r['trace']} | {r['workers']} x{r['speed']:g} | {r['capacity']:,} | {r['seed']} | "
            f"{a['hit_rate']:.4f} -> {b['hit_rate']:.4f} | {a['imbalance']:.3f} -> {b['imbalance']:.3f} | "
            f"{a['ttft_p99_s']:.2f} -> {b['ttft_p99_s']:.2f} |"
        )
    for key, better in (("hit_rate", 1), ("ttft_p99_s", -1)):
        up = sum(better * (r["set"][key] - r["default"][key]) > 0 for r in rows)
        down = sum(better * (r["set"][key] - r["default"][key]) < 0 for r in rows)
        lines.append(f"\n{key}: better with the setting in {up} of {len(rows)} cells, worse in {down}.")
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--set", action="append", required=True, metavar="KEY=VALUE", dest="settings")
    add_grid_arguments(parser, "sim_knob", "8x1,64x8")
    args = parser.parse_args()
    cells = grid_cells(parser, args)
    with ThreadPoolExecutor(args.jobs) as pool:
        rows = list(pool.map(lambda c: _cell(*c, args.settings), cells))
    command = ("python bench/sim_knob.py " + " ".join(sys.argv[1:])).strip()
    report = {"commit": _commit(), "command": command, "settings": args.settings,
              "machine": platform.processor() or platform.machine(), "rows": rows}  # fmt: skip
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{args.name}.json").write_text(json.dumps(report, indent=1) + "\n")
    md = [
        "# kvgate's policy with routing settings changed, against its defaults (simulation)",
        "",
        f"Commit {report['commit']}; command `{command}`; 8B-on-H100 defaults (`kvgate/sim/settings.py`).",
        "",
        *_lines(rows, args.settings),
    ]
    (out / f"{args.name}.md").write_text("\n".join(md) + "\n")
    print("\n".join(md))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
