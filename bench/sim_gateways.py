"""Gateway replicas in simulation: hit rate and TTFT of 16 gateways against 1, with worker events and
without any (Redis and the event streams out of reach for the whole run), over seeds and cluster sizes.

    python bench/sim_gateways.py [--trace T] [--seeds 0,1,2] [--sizes 8x1,16x2,32x4] [--gateways 16]
                                 [--capacity-tokens 1000000] [--jobs 2] [--out bench/results]
                                 [--name sim_gateways] [--no-admissions-column]
                                 [--spread-arrivals MS]

For a conversation trace: ``python bench/conversation_trace.py conv.jsonl --seed N``, then
``--trace conv.jsonl --capacity-tokens 300000 --sizes 8x4,16x8,32x16 --name sim_gateways_conv_N``.

A size ``WxS`` is W workers with the trace's arrivals sped up S times (so the load per worker stays
about the same). Each cell runs ``kvgate simulate TRACE --policy kvgate --capacity-tokens C
--workers W --speed S --seed N --gateways G [--no-index-events] [--no-admissions]
[--spread-arrivals MS] --json`` in a subprocess (``--jobs`` at a time). Writes ``NAME.json`` (one
row per cell) and ``NAME.md`` (the ratios the cluster-scale targets are stated in: G gateways against
1 with events, and without events against with, at the same gateway count; and, unless
``--no-admissions-column``, G gateways with events but without admissions, against 1 gateway).
``--spread-arrivals``: for a trace that rounds its timestamps (Mooncake's recorded traces, to about
3 s), the requests of one step arrive over MS ms instead of at one instant.
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.gateway import _commit

DEFAULT_TRACE = Path(__file__).resolve().parents[2] / "shared" / "traces" / "synthetic_trace.jsonl"


def _cell(
    trace: str,
    capacity: int,
    workers: int,
    speed: float,
    seed: int,
    gateways: int,
    events: bool,
    admissions: bool = True,
    spread_ms: float = 0.0,
) -> dict:
    command = [
        sys.executable, "-m", "kvgate.cli.main", "simulate", trace, "--policy", "kvgate",
        "--capacity-tokens", str(capacity), "--workers", str(workers), "--speed", str(speed),
        "--seed", str(seed), "--gateways", str(gateways), "--json", "--quiet",
    ]  # fmt: skip
    if not events:
        command.append("--no-index-events")
    if not admissions:
        command.append("--no-admissions")
    if spread_ms:
        command += ["--spread-arrivals", str(spread_ms)]
    done = subprocess.run(command, capture_output=True, text=True, check=True)
    result = json.loads(done.stdout)["policies"]["kvgate"]
    row = {"workers": workers, "speed": speed, "seed": seed, "gateways": gateways, "events": events,
           "admissions": admissions}  # fmt: skip
    keys = ("hit_rate", "ttft_p50_s", "ttft_p99_s", "imbalance")
    row.update({k: round(result[k], 4) for k in keys})
    print(
        f"{workers}w x{speed:g} seed {seed} {gateways} gw {'events' if events else 'no events'}"
        f"{'' if admissions else ', no admissions'}: "
        f"hit {row['hit_rate']:.3f} p50 {row['ttft_p50_s']:.3f} p99 {row['ttft_p99_s']:.2f}",
        file=sys.stderr,
        flush=True,
    )
    return row


def _ratio_rows(rows: list[dict], gateways: int) -> list[str]:
    at = {(r["workers"], r["seed"], r["gateways"], r["events"]): r for r in rows if r["admissions"]}
    silent = {(r["workers"], r["seed"]): r for r in rows if not r["admissions"]}
    lines = [
        f"| workers x speed | seed | hit, 1 gw | hit, {gateways} gw | hit ratio | p99 1 gw (s) | "
        f"p99 {gateways} gw (s) | p99 ratio | no events: hit 1 gw / {gateways} gw | "
        "no events / events, 1 gw | no events / events, "
        f"{gateways} gw | no events p99 1 gw / {gateways} gw (s) | p99 ratio, {gateways} gw without "
        "admissions |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        if r["gateways"] != 1 or not r["events"] or not r["admissions"]:
            continue
        w, seed = r["workers"], r["seed"]
        one, many = r, at[(w, seed, gateways, True)]
        blind_one, blind_many = at[(w, seed, 1, False)], at[(w, seed, gateways, False)]
        lines.append(
            f"| {w} x{r['speed']:g} | {seed} | {one['hit_rate']:.3f} | {many['hit_rate']:.3f} | "
            f"{many['hit_rate'] / one['hit_rate']:.3f} | {one['ttft_p99_s']:.2f} | "
            f"{many['ttft_p99_s']:.2f} | "
            f"{many['ttft_p99_s'] / one['ttft_p99_s']:.3f} | "
            f"{blind_one['hit_rate']:.3f} / {blind_many['hit_rate']:.3f} | "
            f"{blind_one['hit_rate'] / one['hit_rate']:.3f} | "
            f"{blind_many['hit_rate'] / many['hit_rate']:.3f} | "
            f"{blind_one['ttft_p99_s']:.2f} / {blind_many['ttft_p99_s']:.2f} | "
            f"{_silent(silent, w, seed, one)} |"
        )
    return lines


def _silent(silent: dict, workers: int, seed: int, one: dict) -> str:
    """The p99 ratio of the gateways without admissions against 1 gateway, or a dash."""
    row = silent.get((workers, seed))
    return f"{row['ttft_p99_s'] / one['ttft_p99_s']:.3f}" if row else "-"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trace", default=str(DEFAULT_TRACE))
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--sizes", default="8x1,16x2,32x4", help="WORKERSxSPEED, comma-separated")
    parser.add_argument("--gateways", type=int, default=16)
    parser.add_argument("--capacity-tokens", type=int, default=1_000_000, help="GPU tokens per worker")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--name", default="sim_gateways", help="result file name, without extension")
    parser.add_argument("--no-admissions-column", dest="admissions_column", action="store_false",
                        help="skip the cells of G gateways without admissions")  # fmt: skip
    parser.add_argument("--spread-arrivals", type=float, default=0.0, metavar="MS",
                        help="kvgate simulate's: a timestamp's requests arrive over MS ms")  # fmt: skip
    parser.add_argument("--out", default=str(Path(__file__).resolve().parent / "results"))
    args = parser.parse_args()
    sizes = [(int(w), float(s)) for w, s in (size.split("x") for size in args.sizes.split(","))]
    seeds = [int(s) for s in args.seeds.split(",")]
    cells = [
        (args.trace, args.capacity_tokens, w, s, seed, g, events)
        for w, s in sizes for seed in seeds for events in (True, False) for g in (1, args.gateways)
    ]  # fmt: skip
    if args.admissions_column:
        cells += [(args.trace, args.capacity_tokens, w, s, seed, args.gateways, True, False)
                  for w, s in sizes for seed in seeds]  # fmt: skip
    with ThreadPoolExecutor(args.jobs) as pool:
        rows = list(pool.map(lambda c: _cell(*c, spread_ms=args.spread_arrivals), cells))
    command = "python bench/sim_gateways.py " + " ".join(sys.argv[1:])
    report = {"commit": _commit(), "command": command.strip(), "trace": Path(args.trace).name,
              "capacity_tokens": args.capacity_tokens, "spread_arrivals_ms": args.spread_arrivals,
              "machine": platform.processor() or platform.machine(), "rows": rows}  # fmt: skip
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{args.name}.json").write_text(json.dumps(report, indent=1) + "\n")
    md = [
        "# Gateway replicas in simulation",
        "",
        f"Commit {report['commit']}; command `{report['command']}`; trace `{report['trace']}`; "
        f"8B-on-H100 defaults, {args.capacity_tokens:,} GPU tokens per worker, policy kvgate.",
        "",
        *_ratio_rows(rows, args.gateways),
        "",
    ]
    (out / f"{args.name}.md").write_text("\n".join(md))
    print("\n".join(md))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
