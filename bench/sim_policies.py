"""kvgate's policy beside the peers' routers, on several traces, cluster sizes, capacities and seeds.

    python bench/sim_policies.py [--traces synthetic,chat,agents,documents,pastes]
                                 [--sizes 8x1,64x8,256x32] [--capacities 1000000,300000]
                                 [--seeds 0,1,2] [--jobs 2] [--out bench/results] [--name sim_policies]
                                 [--recorded NAME=PATH] [--resume] [--check]

``synthetic`` is the shared Mooncake synthetic trace; ``mooncake_conversation`` is the multi-turn
conversation trace published with it (kvcache-ai/Mooncake, Apache-2.0,
``FAST25-release/traces/conversation_trace.jsonl``: 12,031 requests of a real chat service over an
hour, every prompt opening with one shared 512-token block), read from beside the synthetic trace
or from ``--recorded mooncake_conversation=PATH``. A recorded trace is one fixed file: its seed
fixes only the simulation's request keys (tie-breaks). The file is at
https://raw.githubusercontent.com/kvcache-ai/Mooncake/main/FAST25-release/traces/conversation_trace.jsonl.
``mooncake_arxiv_excerpt`` is 1,000 consecutive requests (150 s, timestamps 1,178,625-1,328,245 ms;
sha256 42af0f9a813095782299f34fff4e6df907326e3e846f25c0e9c7132b70e44cc8) of the trace of
Mooncake's technical report (``mooncake_trace.jsonl``, a Kimi service: one shared 512-token
opening on most chat prompts, two agent-style openings of 6k and 2.5k tokens, most asked for under
40 output tokens), as the file ``mooncake_trace.jsonl`` that the public repository hiverge/dynamo holds at
commit 4915d8f; read from beside the synthetic trace as ``mooncake_trace_excerpt.jsonl`` or from
``--recorded mooncake_arxiv_excerpt=PATH``. A recorded trace read from its default place must be
the file the stored results were made from (:data:`RECORDED_SHA256`); another file is run only when
``--recorded`` names it, and each grid's results give the sha256 of every recorded trace it read.
``chat``, ``agents``, ``documents`` and ``pastes``
are made by ``bench/workload_traces.py --shape S --seed N`` (one trace per seed, under
``--traces-dir``). ``pastes_sparse``, ``pastes_loyal`` and ``pastes_busy`` are the pastes shape with
other parameters (:data:`VARIANTS`): a conversation service's hit rate rests on how much of it is
reusable, so the policies are also compared where little (a pooled 0.27) or more is. A size ``WxS``
is W workers with the arrivals sped up S times. Each cell runs ``kvgate simulate TRACE --policy all
--workers W --speed S --capacity-tokens C --seed N --json`` in a subprocess (``--jobs`` at a time).
Each finished cell is kept in ``NAME.cells.jsonl`` (:mod:`bench.grid_checkpoint`) until the results
are written: ``--resume`` runs only the cells that a stopped run of the same grid did not finish
with the same code and traces; ``--check`` runs nothing and only checks the grid's traces. Writes
``NAME.json`` (every policy of every cell, and each recorded trace's sha256) and ``NAME.md``: per
cell, kvgate's hit rate against the best peer's and the pooled cache's, its imbalance, and its TTFT
p99 against the best other policy's; then each policy's figures averaged over the seeds; then the runs
that meet each routing target, and every miss (``bench/sim_targets.py``).
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from itertools import count
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.gateway import _commit
from bench.grid_checkpoint import CellKey, GridCheckpoint, code_identity, file_sha256, run_identity
from bench.sim_targets import render
from kvgate.gateway.routing import PEER_POLICIES

SHARED_TRACES = Path(__file__).resolve().parents[2] / "shared" / "traces"
SYNTHETIC = SHARED_TRACES / "synthetic_trace.jsonl"
RECORDED = {
    "synthetic": SYNTHETIC,
    "mooncake_conversation": SHARED_TRACES / "conversation_trace.jsonl",
    "mooncake_arxiv_excerpt": SHARED_TRACES / "mooncake_trace_excerpt.jsonl",
}
"""Traces recorded elsewhere (not generated): name -> where they are read from by default."""
RECORDED_SHA256 = {
    "synthetic": "bd070915a98fc0ed264d7cfef2ce746002eb3076a695ec31ba2674c0111ec131",
    "mooncake_conversation": "b8cbb061a85206d729d91cdc2981f43c9e0d99209dce588d3af5f7934408b9df",
    "mooncake_arxiv_excerpt": "42af0f9a813095782299f34fff4e6df907326e3e846f25c0e9c7132b70e44cc8",
}
"""The sha256 of each recorded trace the results in ``bench/results`` were made from."""
PEERS = PEER_POLICIES
TRACES = ("synthetic", "chat", "agents", "documents", "pastes")
VARIANTS: dict[str, tuple[str, tuple[str, ...]]] = {
    "pastes_sparse": ("pastes", ("--turns", "1.4", "--paste-tokens", "12000")),  # pooled 0.27-0.29
    "pastes_loyal": ("pastes", ("--system-prompts", "300", "--turns", "2.2")),  # longer, fewer prompts
    "pastes_busy": ("pastes", ("--conversations", "4500", "--paste-tokens", "6000")),  # more, shorter
}
"""Variant traces: (shape, ``bench/workload_traces.py`` options changed from the shape's defaults)."""
KEYS = ("hit_rate", "imbalance", "ttft_p50_s", "ttft_p99_s")


def _trace(name: str, seed: int, folder: Path, recorded: dict[str, Path] = RECORDED) -> str:
    """The path of trace ``name`` for ``seed``: a recorded trace's file, else the generated one under
    ``folder`` (written on first use)."""
    if name in recorded:
        return str(recorded[name])
    path = folder / f"{name}_{seed}.jsonl"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        script = Path(__file__).resolve().parent / "workload_traces.py"
        shape, options = VARIANTS.get(name, (name, ()))
        command = [sys.executable, str(script), str(path), "--shape", shape, "--seed", str(seed), *options]
        subprocess.run(command, check=True, capture_output=True)
    return str(path)


def _recorded(
    options: list[str], traces: list[str], defaults: dict[str, Path] = RECORDED,
    expected: dict[str, str] = RECORDED_SHA256,
) -> dict[str, Path]:  # fmt: skip
    """The recorded traces' paths, ``defaults`` overridden by ``NAME=PATH`` options; ValueError for
    an unknown trace name, a recorded trace that ``traces`` asks for and is not there, or one read
    from its default path whose sha256 is not ``expected``'s (a file named by an option is taken as
    it is)."""
    known = tuple(dict.fromkeys((*TRACES, *VARIANTS, *defaults)))
    unknown = sorted(set(traces) - set(known))
    if unknown:
        raise ValueError(f"unknown traces {unknown}: choose from {', '.join(known)}")
    paths, named = dict(defaults), set()
    for option in options:
        name, _, path = option.partition("=")
        if name not in defaults or not path:
            raise ValueError(f"--recorded takes NAME=PATH with NAME one of {', '.join(defaults)}: {option!r}")
        paths[name] = Path(path)
        named.add(name)
    for name in dict.fromkeys(traces):
        if name not in paths:
            continue
        if not paths[name].is_file():
            raise ValueError(f"recorded trace {name} is not at {paths[name]} (see the module docstring)")
        if name not in named and (digest := file_sha256(paths[name])) != expected[name]:
            raise ValueError(
                f"recorded trace {name} at {paths[name]} is not the file the stored results were made "
                f"from (sha256 {digest}, expected {expected[name]}); pass --recorded {name}={paths[name]} "
                "to run on it anyway"
            )
    return paths


def recorded_digests(cells: list[Cell]) -> dict[str, str]:
    """Trace name -> sha256 of each recorded trace file that ``cells`` read."""
    paths = {trace: path for trace, path, _ in cells if trace in RECORDED}
    return {trace: file_sha256(Path(path)) for trace, path in sorted(paths.items())}


Cell = tuple[str, str, tuple[int, float, int, int]]
"""(trace, its path, (workers, speed, GPU tokens per worker, seed)): one run of ``kvgate simulate``."""


def simulate(path: str, cell: tuple[int, float, int, int], policy: str, settings: Sequence[str] = ()) -> dict:
    """``kvgate simulate PATH --policy POLICY --json`` for one cell (workers, speed, GPU tokens per
    worker, seed) with ``--routing-config`` ``settings``, in a subprocess: its JSON report. Exits
    naming the command and the simulator's reason when it fails."""
    workers, speed, capacity, seed = cell
    command = [
        sys.executable, "-m", "kvgate.cli.main", "simulate", path, "--policy", policy,
        "--workers", str(workers), "--speed", str(speed), "--capacity-tokens", str(capacity),
        "--seed", str(seed), "--json", "--quiet",
    ]  # fmt: skip
    for setting in settings:
        command += ["--routing-config", setting]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:  # say which cell failed and why, not just a traceback of this script
        raise SystemExit(f"{' '.join(command[2:])} failed ({done.returncode}):\n{done.stderr[-2000:]}")
    return json.loads(done.stdout)


def add_grid_arguments(parser: argparse.ArgumentParser, name: str, sizes: str) -> None:
    """The options that choose a grid's cells and where its results go (``name``, ``sizes``: the
    defaults of ``--name`` and ``--sizes``)."""
    parser.add_argument("--traces", default=",".join(TRACES))
    parser.add_argument("--sizes", default=sizes, help="WORKERSxSPEED, comma-separated")
    parser.add_argument("--capacities", default="1000000,300000", help="GPU tokens per worker")
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--name", default=name, help="result file name, without extension")
    parser.add_argument("--out", default=str(Path(__file__).resolve().parent / "results"))
    parser.add_argument("--traces-dir", default="/tmp/kvgate-traces", help="where generated traces go")
    parser.add_argument(
        "--recorded", action="append", default=[], metavar="NAME=PATH",
        help=f"read recorded trace NAME ({', '.join(RECORDED)}) from PATH",
    )  # fmt: skip


def grid_cells(parser: argparse.ArgumentParser, args: argparse.Namespace) -> list[Cell]:
    """(trace, its path, (workers, speed, GPU tokens per worker, seed)) of every cell the grid
    options ask for, generated traces written on first use; a parser error for a bad trace name or a
    recorded trace that is not there."""
    try:
        recorded = _recorded(args.recorded, args.traces.split(","))
    except ValueError as error:
        parser.error(str(error))
    sizes = [(int(w), float(s)) for w, s in (size.split("x") for size in args.sizes.split(","))]
    return [(t, _trace(t, seed, Path(args.traces_dir), recorded), (w, s, int(c), seed))
            for t in args.traces.split(",") for w, s in sizes
            for c in args.capacities.split(",") for seed in map(int, args.seeds.split(","))]  # fmt: skip


def cell_row(trace: str, path: str, cell: tuple[int, float, int, int]) -> dict:
    """The grid row of one cell: ``kvgate simulate PATH --policy all`` for ``cell`` (workers, speed,
    GPU tokens per worker, seed), every policy's figures rounded to four decimals as grids store
    them. Progress on stderr."""
    workers, speed, capacity, seed = cell
    report = simulate(path, cell, "all")
    row = {"trace": trace, "workers": workers, "speed": speed, "capacity": capacity, "seed": seed,
           "pooled": round(report["pooled_hit_rate"], 4),
           "policies": {name: {k: round(p[k], 4) for k in KEYS} | {"reasons": p["reasons"]}
                        for name, p in report["policies"].items()}}  # fmt: skip
    k = row["policies"]["kvgate"]
    print(f"{trace} {workers}w x{speed:g} {capacity:,} seed {seed}: kvgate hit {k['hit_rate']:.3f} "
          f"p99 {k['ttft_p99_s']:.2f}", file=sys.stderr, flush=True)  # fmt: skip
    return row


def _cell_lines(rows: list[dict]) -> list[str]:
    lines = [
        "| trace | workers x speed | tokens/worker | seed | kvgate hit | best peer hit | kvgate / best peer "
        "| kvgate / pooled | imbalance | kvgate p99 (s) | best other p99 (s) | kvgate p99 / best other |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        pol = r["policies"]
        k = pol["kvgate"]
        peer = max(PEERS, key=lambda n: pol[n]["hit_rate"])
        other = min((n for n in pol if n != "kvgate"), key=lambda n: pol[n]["ttft_p99_s"])
        lines.append(
            f"| {r['trace']} | {r['workers']} x{r['speed']:g} | {r['capacity']:,} | {r['seed']} | "
            f"{k['hit_rate']:.3f} | {pol[peer]['hit_rate']:.3f} ({peer}) | "
            f"{k['hit_rate'] / pol[peer]['hit_rate']:.3f} | {k['hit_rate'] / r['pooled']:.3f} | "
            f"{k['imbalance']:.3f} | {k['ttft_p99_s']:.2f} | {pol[other]['ttft_p99_s']:.2f} ({other}) | "
            f"{k['ttft_p99_s'] / pol[other]['ttft_p99_s']:.3f} |"
        )
    return lines


def _mean_lines(rows: list[dict]) -> list[str]:
    groups: dict[tuple, list[dict]] = {}
    for r in rows:
        groups.setdefault((r["trace"], r["workers"], r["speed"], r["capacity"]), []).append(r)
    lines = []
    for (trace, workers, speed, capacity), cell in groups.items():
        lines += [
            "",
            f"**{trace}, {workers} workers x{speed:g}, {capacity:,} tokens/worker** (mean of seeds "
            f"{', '.join(str(r['seed']) for r in cell)}; pooled {cell[0]['pooled']:.3f})",
            "",
            "| policy | hit rate | imbalance | TTFT p50 (s) | TTFT p99 (s) |",
            "|---|---|---|---|---|",
        ]
        for name in cell[0]["policies"]:
            mean = {k: sum(r["policies"][name][k] for r in cell) / len(cell) for k in KEYS}
            lines.append(f"| {name} | {mean['hit_rate']:.3f} | {mean['imbalance']:.3f} | "
                         f"{mean['ttft_p50_s']:.3f} | {mean['ttft_p99_s']:.2f} |")  # fmt: skip
    return lines


def run_cells(cells: list[Cell], jobs: int, checkpoint: GridCheckpoint, resume: bool) -> list[dict]:
    """Every cell's row, in the order of ``cells``: those ``checkpoint`` holds from this code when
    ``resume``, the others run ``jobs`` at a time, each kept in ``checkpoint`` as it finishes (a
    fresh run clears it first). Progress goes to stderr."""
    if not resume:
        checkpoint.clear()
    done = checkpoint.finished(map(_key, cells))
    todo = [c for c in cells if _key(c) not in done]
    where = f"{checkpoint.path} ({checkpoint.identity})"
    print(f"{len(done)} of {len(cells)} cells from {where}; {len(todo)} to run", file=sys.stderr, flush=True)
    finished = count(len(done) + 1)

    def run(cell: Cell) -> dict:
        row = cell_row(*cell)
        checkpoint.add(row)
        print(f"[{next(finished)}/{len(cells)} cells]", file=sys.stderr, flush=True)
        return row

    with ThreadPoolExecutor(jobs) as pool:
        ran = dict(zip(map(_key, todo), pool.map(run, todo), strict=True))
    return [done.get(_key(c)) or ran[_key(c)] for c in cells]


def _key(cell: Cell) -> CellKey:
    trace, _, (workers, speed, capacity, seed) = cell
    return (trace, workers, float(speed), capacity, seed)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_grid_arguments(parser, "sim_policies", "8x1,64x8,256x32")
    parser.add_argument(
        "--resume", action="store_true",
        help="take the cells this grid finished with the same code (NAME.cells.jsonl, NAME.json)",
    )  # fmt: skip
    parser.add_argument(
        "--check", action="store_true",
        help="only check the grid's traces (recorded ones there and as expected, generated ones written)",
    )  # fmt: skip
    args = parser.parse_args()
    out = Path(args.out)
    cells = grid_cells(parser, args)
    if args.check:
        print(f"{args.name}: {len(cells)} cells, every trace ready", file=sys.stderr)
        return 0
    traces = recorded_digests(cells)
    checkpoint = GridCheckpoint(out / f"{args.name}.cells.jsonl", run_identity(code_identity(), traces))
    if args.resume:
        checkpoint.adopt(out / f"{args.name}.json")
    rows = run_cells(cells, args.jobs, checkpoint, args.resume)
    command = ("python bench/sim_policies.py " + " ".join(a for a in sys.argv[1:] if a != "--resume")).strip()
    report = {"commit": _commit(), "code": checkpoint.identity, "command": command, "traces": traces,
              "machine": platform.processor() or platform.machine(), "rows": rows}  # fmt: skip
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{args.name}.json").write_text(json.dumps(report, indent=1) + "\n")
    md = [
        "# kvgate's policy beside the peers' routers (simulation)",
        "",
        f"Commit {report['commit']}; command `{command}`; 8B-on-H100 defaults (`kvgate/sim/settings.py`).",
        "Peers: " + ", ".join(PEERS) + " (`gateway/routing/peers/`).",
        *[f"Recorded trace {name}: sha256 {digest}." for name, digest in traces.items()],
        "",
        *_cell_lines(rows),
        *_mean_lines(rows),
        "",
        "## Targets (`bench/sim_targets.py`)",
        "",
        render([(args.name, report)]),
        "",
    ]
    (out / f"{args.name}.md").write_text("\n".join(md))
    checkpoint.clear()  # every row is in NAME.json now
    print("\n".join(md))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
