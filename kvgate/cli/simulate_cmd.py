"""``kvgate simulate``: replay a prefix-reuse trace (Mooncake or Qwen-Bailian JSONL) through the real
hashing, index and policies."""

from __future__ import annotations

import argparse
import json
import sys
import time

from kvgate.cli.trace_args import add_trace_arguments
from kvgate.gateway.routing import policy_names
from kvgate.gateway.routing.overrides import routing_config
from kvgate.sim.engine import Progress
from kvgate.sim.report import format_table
from kvgate.sim.runner import resolve_policies, simulate
from kvgate.sim.settings import SimSettings
from kvgate.sim.trace import read_trace, spread_arrivals
from kvgate.sim.workload import Workload

HELP = (
    "simulate routing policies on a prefix-reuse trace (Mooncake or Qwen-Bailian JSONL) "
    "over simulated workers"
)
_DEFAULTS = SimSettings()
PROGRESS_AFTER_S = 2.0  # a run this long starts reporting progress on stderr
PROGRESS_EVERY_S = 2.0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("trace", help="JSONL file: timestamp, input_length, output_length, hash_ids")
    add_trace_arguments(parser)
    parser.add_argument(
        "--policy", action="append", help=f"repeatable, or 'all' (default): {', '.join(policy_names())}"
    )
    parser.add_argument("--workers", type=int, default=_DEFAULTS.workers)
    parser.add_argument("--capacity-tokens", type=int, default=_DEFAULTS.capacity_tokens, help="GPU/worker")
    parser.add_argument("--cpu-capacity-tokens", type=int, default=0, help="CPU tier per worker (0: none)")
    parser.add_argument("--chunk-size", type=int, default=_DEFAULTS.chunk_size, help="tokens per chunk")
    parser.add_argument("--prefill-tokens-per-s", type=float, default=_DEFAULTS.prefill_tokens_per_s)
    parser.add_argument("--swap-in-tokens-per-s", type=float, default=_DEFAULTS.swap_in_tokens_per_s)
    parser.add_argument("--decode-step-s", type=float, default=_DEFAULTS.decode_step_s)
    parser.add_argument("--kv-fetch-tokens-per-s", type=float, default=_DEFAULTS.kv_fetch_tokens_per_s,
                        help="how fast a worker fetches a prefix from the KV source its request names "
                             "(0: workers never fetch)")  # fmt: skip
    parser.add_argument("--ttl-s", type=float, default=_DEFAULTS.ttl_s, help="KV TTL (both tiers)")
    parser.add_argument("--heartbeat-s", type=float, default=_DEFAULTS.heartbeat_s)
    parser.add_argument("--speed", type=float, default=1.0, help="multiply the arrival rate")
    parser.add_argument("--limit", type=int, help="replay only the first N requests")
    parser.add_argument("--spread-arrivals", type=float, default=0.0, metavar="MS",
                        help="the requests recorded at one timestamp arrive evenly over the MS ms that "
                             "follow it (for traces that round their timestamps)")  # fmt: skip
    parser.add_argument("--seed", type=int, default=0, help="seed of the per-request keys")
    parser.add_argument(
        "--gateways",
        type=int,
        default=1,
        help="gateway replicas, each with its own index replica and pending record",
    )
    parser.add_argument("--event-delay-s", type=float, default=None,
                        help="seconds until a worker's events reach each replica (default: 0 with one "
                             "gateway, else 0.005)")  # fmt: skip
    parser.add_argument("--no-index-events", dest="index_events", action="store_false",
                        help="no worker event or load report reaches any gateway for the whole run "
                             "(Redis and the event streams out of reach): gateways route on what they "
                             "learn from their own decisions")  # fmt: skip
    parser.add_argument("--no-admissions", dest="admissions", action="store_false",
                        help="workers do not announce the requests they take in (only stored chunks "
                             "and periodic load reports reach the gateways)")  # fmt: skip
    parser.add_argument(
        "--routing-config", action="append", default=[], metavar="KEY=VALUE", help="override RoutingConfig"
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    parser.add_argument("--plot", metavar="DIR", help="write PNG plots into DIR (needs matplotlib)")
    parser.add_argument("--quiet", action="store_true", help="no progress on stderr")


def run(args: argparse.Namespace) -> int:
    settings = _settings(args)
    routing = routing_config(args.routing_config)
    policies = resolve_policies(args.policy or ["all"])
    if args.limit is not None and args.limit < 1:
        raise ValueError("--limit must be >= 1")
    reporter = _ProgressReporter(args.quiet)
    try:
        trace = read_trace(args.trace, args.trace_format, args.trace_block_tokens, args.limit)
    except OSError as exc:
        raise ValueError(f"cannot read the trace: {exc}") from None
    if not args.quiet:
        print(f"{args.trace}: {trace.describe()}", file=sys.stderr, flush=True)
    requests = spread_arrivals(trace.requests, args.spread_arrivals)
    workload = Workload.build(requests, trace.block_tokens, settings.chunk_size)
    report = simulate(workload, settings, policies, routing, reporter.for_policy)
    reporter.done()
    if args.plot:
        from kvgate.sim.plots import write_plots  # matplotlib only when asked for

        write_plots(report, args.plot)
    print(json.dumps(report.to_json()) if args.json else format_table(report))
    return 0


def _settings(args: argparse.Namespace) -> SimSettings:
    return SimSettings(
        workers=args.workers,
        capacity_tokens=args.capacity_tokens,
        cpu_capacity_tokens=args.cpu_capacity_tokens,
        chunk_size=args.chunk_size,
        prefill_tokens_per_s=args.prefill_tokens_per_s,
        swap_in_tokens_per_s=args.swap_in_tokens_per_s,
        decode_step_s=args.decode_step_s,
        kv_fetch_tokens_per_s=args.kv_fetch_tokens_per_s,
        ttl_s=args.ttl_s,
        cpu_ttl_s=args.ttl_s,
        heartbeat_s=args.heartbeat_s,
        speed=args.speed,
        seed=args.seed,
        gateways=args.gateways,
        event_delay_s=_event_delay(args),
        index_events=args.index_events,
        admissions=args.admissions,
    )


def _event_delay(args: argparse.Namespace) -> float:
    if args.event_delay_s is not None:
        return args.event_delay_s
    return 0.0 if args.gateways == 1 else 0.005


class _ProgressReporter:
    """Progress lines on stderr, once a run has taken ``PROGRESS_AFTER_S``, at most every
    ``PROGRESS_EVERY_S``; silent when ``quiet``."""

    def __init__(self, quiet: bool) -> None:
        self._quiet = quiet
        self._began = time.monotonic()
        self._last = self._began
        self._shown = False
        self._tty = sys.stderr.isatty()

    def for_policy(self, name: str) -> Progress | None:
        if self._quiet:
            return None

        def report(done: int, total: int, sim_s: float) -> None:
            now = time.monotonic()
            if now - self._began >= PROGRESS_AFTER_S and now - self._last >= PROGRESS_EVERY_S:
                self._last, self._shown = now, True
                line = f"{name}: {done}/{total} requests, {sim_s:,.0f} s simulated"
                # On a terminal the line rewrites itself; in a log each report is a line of its own.
                print(f"\r{line}" if self._tty else line, end="" if self._tty else "\n", file=sys.stderr)

        return report

    def done(self) -> None:
        if self._shown and self._tty:
            print(file=sys.stderr)
