"""``kvgate plan``: KV memory per worker for a model, GPUs and a KV dtype; with a trace, how many workers.

The formula and its assumptions are in ``docs/PLANNING.md`` and :mod:`kvgate.plan.memory`.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING

from kvgate.cli.size_args import parse_bytes
from kvgate.cli.trace_args import add_trace_arguments, trace_options
from kvgate.plan.memory import MemoryInputs, MemoryPlan, plan_memory
from kvgate.plan.model_source import resolve_model
from kvgate.plan.report import format_others, format_plan, format_sweep, plan_json
from kvgate.plan.search import Sweep, Target, simulate_command, sweep, workload_of
from kvgate.proto.kv_dtype import AUTO, KV_DTYPES, resolve_kv_dtype
from kvgate.proto.layout import DEFAULT_BLOCK_SIZE
from kvgate.sim.runner import resolve_policies
from kvgate.sim.trace import read_trace

if TYPE_CHECKING:  # the workers' package imports torch: not at the CLI's start
    from kvgate.workers.model.config import ModelConfig

HELP = "plan KV memory per worker (tokens, blocks, prefix copies); with --trace, how many workers"
_DTYPES = [AUTO, *KV_DTYPES]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("model", nargs="?", default="default",
                        help="`default` (SmolLM2-135M), a .gguf, a HF folder or a config.json")  # fmt: skip
    parser.add_argument("--gpu-memory", type=parse_bytes, default="80GiB", help="per GPU, e.g. 80GiB, 24GB")
    parser.add_argument("--memory-utilization", type=float, default=0.9,
                        help="share of GPU memory for weights + KV (rest: activations, slack)")  # fmt: skip
    parser.add_argument("--kv-dtype", default=AUTO, choices=_DTYPES, help="KV element type (auto: --dtype)")
    parser.add_argument("--dtype", default="bf16", choices=["bf16", "fp16", "fp32"], help="weights' dtype")
    parser.add_argument("--tp", type=int, default=1, help="tensor-parallel GPUs per worker (KV heads split)")
    parser.add_argument("--cpu-memory", type=parse_bytes, default=0, help="CPU tier per worker, e.g. 256GiB")
    parser.add_argument("--block-size", type=int, default=DEFAULT_BLOCK_SIZE, help="tokens per KV block")
    parser.add_argument("--prefix-tokens", type=int, default=0, help="count copies of a prefix this long")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    sweep_args = parser.add_argument_group("sweep (with --trace)")
    sweep_args.add_argument("--trace", help="Mooncake or Qwen-Bailian JSONL trace to simulate")
    sweep_args.add_argument("--target-hit-rate", type=float, help="token hit rate to reach")
    sweep_args.add_argument("--target-p99", type=float, help="TTFT p99 (s) to stay under")
    sweep_args.add_argument("--workers", type=_counts, default=[1, 2, 4, 8], help="worker counts: 1,2,4,8")
    sweep_args.add_argument("--kv-dtypes", type=_names, default=[AUTO, "int8", "fp8"],
                            help="KV dtypes compared at the same memory (default auto,int8,fp8)")  # fmt: skip
    sweep_args.add_argument("--cpu-memories", type=_sizes, metavar="SIZES",
                            help="CPU tier sizes compared: 0,128GiB (default: --cpu-memory)")  # fmt: skip
    sweep_args.add_argument("--policy", default="kvgate", help="routing policy simulated")
    add_trace_arguments(sweep_args)
    sweep_args.add_argument("--limit", type=int, help="simulate only the first N requests")
    sweep_args.add_argument("--plot", metavar="PNG", help="write the sweep's plot here (needs matplotlib)")
    sweep_args.add_argument("--quiet", action="store_true", help="no progress on stderr")


def run(args: argparse.Namespace) -> int:
    _check(args)
    model = resolve_model(args.model)
    primary = resolve_kv_dtype(args.kv_dtype, args.dtype).name
    others = [resolve_kv_dtype(name, args.dtype).name for name in args.kv_dtypes] if args.trace else []
    names = list(dict.fromkeys([primary, *others]))
    plans = {name: _plan(model.config, args, name, args.cpu_memory) for name in names}
    result, reading = None, []
    if args.trace:  # every KV dtype x CPU tier size
        cpu_sizes = args.cpu_memories or [args.cpu_memory]
        plans_swept = [_plan(model.config, args, n, cpu) for cpu in cpu_sizes for n in names]
        result, reading = _sweep(args, plans_swept)
    check = _check_command(args, result, reading)
    if args.json:
        print(json.dumps(plan_json(model.source, plans, primary, args.prefix_tokens, result, check)))
        return 0
    print(format_plan(model.source, plans[primary], args.prefix_tokens))
    if len(plans) > 1:
        print(format_others(plans, primary))
    if result is not None:
        print(f"\n{format_sweep(result, check)}")
    return 0


def _check(args: argparse.Namespace) -> None:
    """Flags that cannot work together fail before the model is read or a simulation starts."""
    if args.prefix_tokens < 0:
        raise ValueError("--prefix-tokens must be >= 0")
    sweep_only = {"--target-hit-rate": args.target_hit_rate, "--target-p99": args.target_p99,
                  "--plot": args.plot, "--cpu-memories": args.cpu_memories}  # fmt: skip
    given = [flag for flag, value in sweep_only.items() if value is not None]
    if given and not args.trace:
        raise ValueError(f"{', '.join(given)} need --trace (the sweep)")
    if args.trace:
        Target(args.target_hit_rate, args.target_p99)  # ValueError without one
        resolve_policies([args.policy])


def _plan(config: ModelConfig, args: argparse.Namespace, kv: str, cpu_memory: int) -> MemoryPlan:
    inputs = MemoryInputs(
        gpu_memory_bytes=args.gpu_memory,
        kv=resolve_kv_dtype(kv, args.dtype),
        memory_utilization=args.memory_utilization,
        tp=args.tp,
        cpu_memory_bytes=cpu_memory,
        weight_dtype=args.dtype,
        block_size=args.block_size,
    )
    return plan_memory(config, inputs)


def _sweep(args: argparse.Namespace, plans: list[MemoryPlan]) -> tuple[Sweep, list[str]]:
    """The sweep over ``plans``, and the options that read the trace as it was read here."""
    target = Target(args.target_hit_rate, args.target_p99)
    if args.limit is not None and args.limit < 1:
        raise ValueError("--limit must be >= 1")
    try:
        trace = read_trace(args.trace, args.trace_format, args.trace_block_tokens, args.limit)
    except OSError as exc:
        raise ValueError(f"cannot read the trace: {exc}") from None
    workload = workload_of(trace.requests, trace.block_tokens)
    progress = None if args.quiet else (lambda line: print(line, file=sys.stderr, flush=True))
    result = sweep(workload, plans, args.workers, target, args.policy, progress)
    if args.plot:
        from kvgate.plan.plot import write_plot  # matplotlib only when asked for

        write_plot(result, args.plot)
    return result, trace_options(trace.trace_format.name, trace.block_tokens)


def _check_command(args: argparse.Namespace, result: Sweep | None, reading: list[str]) -> str | None:
    """The ``kvgate simulate`` command that replays the recommendation (``reading``: the options
    that read the trace as the sweep did); None without one."""
    if result is None or result.recommended is None:
        return None
    extra = [*reading]
    extra += ["--limit", str(args.limit)] if args.limit is not None else []
    return simulate_command(args.trace, result.recommended, result.policy, extra)


def _counts(text: str) -> list[int]:
    counts = [int(part) for part in text.split(",") if part.strip()]
    if not counts or min(counts) < 1:
        raise argparse.ArgumentTypeError(f"worker counts must be >= 1, got {text!r}")
    return counts


def _sizes(text: str) -> list[int]:
    try:
        return [parse_bytes(part) for part in text.split(",") if part.strip()]
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _names(text: str) -> list[str]:
    names = [part.strip() for part in text.split(",") if part.strip()]
    unknown = [n for n in names if n not in _DTYPES]
    if not names or unknown:
        raise argparse.ArgumentTypeError(f"KV dtypes must be among {', '.join(_DTYPES)}, got {text!r}")
    return names
