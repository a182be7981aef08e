"""Run stored grid cells again with the current code and compare every figure with the stored ones.

    python bench/sim_recheck.py GRID [GRID ...] [--traces T,..] [--workers 8,64] [--capacities C,..]
                                [--seeds 0,2] [--jobs 2] [--results bench/results]
                                [--traces-dir DIR] [--recorded NAME=PATH] [--out FILE]

GRID names a grid's results in ``--results`` (``GRID.json``, written by ``bench/sim_policies.py``).
Each cell the filters keep (every cell without them) runs again as ``kvgate simulate TRACE --policy
all`` with the cell's workers, speed, capacity and seed, and its row is compared field by field with
the stored row: the pooled cache's hit rate and, for every policy, the hit rate, imbalance, TTFT p50
and p99 (as stored, to four decimals) and the route reasons. Said otherwise: whether the figures a
document cites from an older commit are the figures the current code gives. A recorded trace must be
the file the grid read (the sha256 in its JSON, or :data:`.sim_policies.RECORDED_SHA256` for a grid
that names none). A generated trace is read from ``--traces-dir`` when it is there, as
``bench/sim_policies.py`` reads it, else made from its seed; an empty folder makes every one anew.

Prints each cell as ``same`` or as the fields that differ (stored -> now), then a summary; ``--out``
also writes the outcome as JSON (commit, command, every cell's key and differences). Exits 0 when
every cell reads as stored, 1 when one differs, 2 for bad options or a trace that is not the grid's.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.grid_checkpoint import file_sha256, row_key
from bench.machine import command_line, git_commit
from bench.sim_policies import KEYS, RECORDED, RECORDED_SHA256, _recorded, _trace, cell_row

RESULTS = Path(__file__).resolve().parent / "results"
FIGURES = (*KEYS, "reasons")
"""What a grid stores of each policy, compared field by field."""


def differences(stored: dict, now: dict) -> list[str]:
    """Each field of grid row ``now`` that is not as in ``stored`` (the same cell), as ``field: stored
    -> now``: ``pooled``, ``POLICY.FIGURE`` (:data:`FIGURES`), or a policy only one of them has."""
    found = [] if stored["pooled"] == now["pooled"] else [f"pooled: {stored['pooled']} -> {now['pooled']}"]
    before, after = stored["policies"], now["policies"]
    for name in dict.fromkeys([*before, *after]):
        if name not in before or name not in after:
            found.append(f"{name}: {'not stored' if name not in before else 'not run now'}")
            continue
        found += [f"{name}.{figure}: {before[name].get(figure)} -> {after[name].get(figure)}"
                  for figure in FIGURES if before[name].get(figure) != after[name].get(figure)]  # fmt: skip
    return found


@dataclass(frozen=True, slots=True)
class Recheck:
    """One stored cell to run again: its grid, its stored row and the trace file it reads."""

    grid: str
    stored: dict
    path: str

    def run(self) -> dict:
        """The cell run with the current code: its key, the grid and each field that differs."""
        trace, *cell = key = row_key(self.stored)
        now = cell_row(trace, self.path, tuple(cell))
        return {"grid": self.grid, "cell": list(key), "differences": differences(self.stored, now)}


def _wanted(row: dict, args: argparse.Namespace) -> bool:
    """Whether the filters (``--traces``, ``--workers``, ``--capacities``, ``--seeds``) keep ``row``."""
    keep = {"trace": args.traces, "workers": args.workers, "capacity": args.capacities, "seed": args.seeds}
    return all(chosen is None or str(row[column]) in chosen.split(",") for column, chosen in keep.items())


@dataclass(slots=True)
class _Sources:
    """Where traces are read: each recorded trace's file (``--recorded`` or its default place), the
    folder of generated ones, and the sha256 of each recorded file read so far (read once)."""

    recorded: dict[str, Path]
    generated: Path
    digests: dict[Path, str] = field(default_factory=dict)


def _trace_path(name: str, seed: int, grid: dict, sources: _Sources) -> str:
    """The file of trace ``name`` for ``seed``: a recorded trace's, checked to be the file ``grid``
    read; else the generated one. ValueError otherwise."""
    if name not in RECORDED:
        return _trace(name, seed, sources.generated)
    path, digests = sources.recorded[name], sources.digests
    if not path.is_file():
        raise ValueError(f"recorded trace {name} is not at {path}: pass --recorded {name}=PATH")
    expected = grid.get("traces", {}).get(name, RECORDED_SHA256[name])
    if path not in digests:
        digests[path] = file_sha256(path)
    if digests[path] != expected:
        raise ValueError(
            f"{path} is not the {name} trace the grid read (sha256 {digests[path]}, grid's {expected})"
        )
    return str(path)


def rechecks(args: argparse.Namespace) -> list[Recheck]:
    """Every stored cell of the named grids that the filters keep, in the grids' order; ValueError
    for a bad ``--recorded``, a grid that is not there or a trace that is not the grid's. A file
    named by ``--recorded`` is checked like any other: a recheck compares with what the grid read."""
    sources, found = _Sources(_recorded(args.recorded, []), Path(args.traces_dir)), []
    for name in args.grids:
        path = Path(args.results) / f"{name}.json"
        if not path.is_file():
            raise ValueError(f"no results {path} (bench/sim_policies.py --name {name} writes them)")
        grid = json.loads(path.read_text())
        found += [Recheck(name, row, _trace_path(row["trace"], row["seed"], grid, sources))
                  for row in grid["rows"] if _wanted(row, args)]  # fmt: skip
    return found


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("grids", nargs="+", metavar="GRID", help="results names, e.g. sim_policies_8w")
    parser.add_argument("--traces", help="only these traces (comma-separated)")
    parser.add_argument("--workers", help="only these cluster sizes")
    parser.add_argument("--capacities", help="only these GPU tokens per worker")
    parser.add_argument("--seeds", help="only these seeds")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--results", default=str(RESULTS), help="where GRID.json is")
    parser.add_argument("--traces-dir", default="/tmp/kvgate-traces", help="where generated traces go")
    parser.add_argument("--recorded", action="append", default=[], metavar="NAME=PATH",
                        help=f"read recorded trace NAME ({', '.join(RECORDED)}) from PATH")  # fmt: skip
    parser.add_argument("--out", help="also write the outcome here as JSON")
    return parser


def main() -> int:
    parser = _parser()
    args = parser.parse_args()
    if args.jobs < 1:
        parser.error("--jobs must be >= 1")
    try:
        todo = rechecks(args)
    except ValueError as error:
        parser.error(str(error))
    if not todo:
        parser.error("the filters keep no stored cell")
    print(f"{len(todo)} stored cells to run again at {git_commit(short=True)}", file=sys.stderr, flush=True)
    with ThreadPoolExecutor(args.jobs) as pool:
        outcomes = []
        for outcome in pool.map(Recheck.run, todo):
            outcomes.append(outcome)
            where = f"{outcome['grid']} {' '.join(map(str, outcome['cell']))}"
            print(f"{where}: " + ("; ".join(outcome["differences"]) or "same"), flush=True)
    differ = sum(bool(o["differences"]) for o in outcomes)
    print(f"{len(outcomes) - differ} of {len(outcomes)} cells read as stored, {differ} differ", flush=True)
    if args.out:
        machine = platform.processor() or platform.machine()
        report = {"commit": git_commit(short=True), "command": command_line(), "machine": machine,
                  "cells": len(outcomes), "differ": differ, "outcomes": outcomes}  # fmt: skip
        Path(args.out).write_text(json.dumps(report, indent=1) + "\n")
    return 1 if differ else 0


if __name__ == "__main__":
    raise SystemExit(main())
