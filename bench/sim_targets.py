"""How many runs of the routing grids meet each routing target (docs/BENCHMARKS.md section 1).

    python bench/sim_targets.py [--results bench/results] GRID [GRID ...]

Reads ``GRID.json`` (written by ``bench/sim_policies.py``) and, per group of runs with the same
trace-independent settings (workers, tokens per worker), counts the runs where kvgate's figures meet
the targets, comparing figures as the grid stores them (four decimals):

- hit rate >= every peer's (``kvgate.gateway.routing.PEER_POLICIES``);
- hit rate >= 0.99 x the pooled cache's (at most 8 workers);
- imbalance <= 1.10 (at most 8 workers);
- TTFT p99 <= every other policy's (at most 8 workers), or every peer's (more workers).

Prints one markdown table (a cell reads ``met of runs``) and, under it, each miss: the run, the
figure and the one it fell short of.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from kvgate.gateway.routing import PEER_POLICIES as PEERS

SMALL = 8
"""Clusters of at most this many workers are held to every target; larger ones to the peers'."""

POOLED_SHARE = 0.99
MAX_IMBALANCE = 1.10
TARGETS = ("hit >= every peer", "hit >= 0.99x pooled", "imbalance <= 1.10", "p99 <= the others")


@dataclass(frozen=True, slots=True)
class Miss:
    """A target one run missed: kvgate's figure, and the figure it had to reach (whose)."""

    target: str
    run: str
    figure: float
    bound: float
    against: str


def misses(row: dict) -> tuple[list[str], list[Miss]]:
    """The targets that apply to one grid row (a run), and those of them it misses."""
    pol, k = row["policies"], row["policies"]["kvgate"]
    run = f"{row['trace']} seed {row['seed']}"
    small = row["workers"] <= SMALL
    peer = max(PEERS, key=lambda n: pol[n]["hit_rate"])
    rivals = [n for n in pol if n != "kvgate"] if small else list(PEERS)
    fastest = min(rivals, key=lambda n: pol[n]["ttft_p99_s"])
    checks = [
        (TARGETS[0], k["hit_rate"], pol[peer]["hit_rate"], peer, True),
        (TARGETS[3], k["ttft_p99_s"], pol[fastest]["ttft_p99_s"], fastest, False),
    ]
    if small:
        pooled = round(POOLED_SHARE * row["pooled"], 4)
        checks += [
            (TARGETS[1], k["hit_rate"], pooled, "0.99x pooled", True),
            (TARGETS[2], k["imbalance"], MAX_IMBALANCE, "the limit", False),
        ]
    missed = [
        Miss(target, run, figure, bound, against)
        for target, figure, bound, against, higher in checks
        if (figure < bound if higher else figure > bound)
    ]
    return [c[0] for c in checks], missed


def group_key(row: dict) -> tuple[int, float, int]:
    return (row["workers"], row["speed"], row["capacity"])


def tally(rows: Iterable[dict]) -> dict[tuple[int, float, int], tuple[int, dict[str, int], list[Miss]]]:
    """Per (workers, speed, tokens per worker): runs, runs meeting each applicable target, misses."""
    groups: dict[tuple[int, float, int], tuple[int, dict[str, int], list[Miss]]] = {}
    for row in rows:
        runs, met, missed = groups.get(group_key(row), (0, {}, []))
        applicable, missed_here = misses(row)
        failed = {m.target for m in missed_here}
        for target in applicable:
            met[target] = met.get(target, 0) + (target not in failed)
        groups[group_key(row)] = (runs + 1, met, missed + missed_here)
    return groups


def render(grids: Sequence[tuple[str, dict]]) -> str:
    """The markdown table and the misses of ``grids`` ((name, the grid's JSON) each)."""
    lines = [
        "| grid | commit | workers x speed | tokens/worker | runs | " + " | ".join(TARGETS) + " |",
        "|---|---|---|---|---|" + "---|" * len(TARGETS),
    ]
    notes: list[str] = []
    for name, grid in grids:
        for (workers, speed, capacity), (runs, met, missed) in tally(grid["rows"]).items():
            cells = [f"{met[t]} of {runs}" if t in met else "-" for t in TARGETS]
            lines.append(
                f"| {name} | {grid['commit']} | {workers} x{speed:g} | {capacity:,} | {runs} | "
                + " | ".join(cells)
                + " |"
            )
            notes += [
                f"- {name}, {workers} workers, {capacity:,} tokens: {m.run}, {m.target}: "
                f"{m.figure:g} against {m.bound:g} ({m.against})"
                for m in missed
            ]
    return "\n".join([*lines, "", "Misses:" if notes else "No misses.", *notes])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("grids", nargs="+", help="grid names (NAME.json under --results)")
    parser.add_argument("--results", type=Path, default=Path("bench/results"))
    args = parser.parse_args()
    grids = []
    for name in args.grids:
        path = args.results / f"{name}.json"
        try:
            grids.append((name, json.loads(path.read_text())))
        except (OSError, ValueError) as exc:
            parser.error(f"cannot read {path}: {exc}")
    print(render(grids))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
