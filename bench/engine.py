"""Engine benchmark (default model: SmolLM2-135M-Instruct): time to first token of a ~2k-token prompt cold
vs with >= 90% of it cached in the GPU tier vs in the CPU tier, KV waste on a mixed workload, and with
``--vs-hf`` the engine against Hugging Face ``transformers`` side by side (``bench/engine_vs_hf.py``).

    python bench/engine.py [--vs-hf] [--json] [--dtype float32|bfloat16|both] [--threads 1]
                           [--kernels NAME] [--device cpu|cuda] [--model PATH] [--out bench/results]
                           [--smoke]

Writes ``engine.md`` and ``engine.json`` (``engine_vs_hf.json`` with ``--vs-hf``) to --out, each naming the
machine, torch threads, commit and command. stdout: the JSON object with ``--json``, else the Markdown;
progress goes to stderr. ``--kernels`` defaults to ``EngineConfig``'s kernel backend; ``--dtype`` goes
through ``EngineConfig.dtype`` (``both``: float32, then bfloat16; the KV-waste figure is counted once, at the
first). ``--smoke``: tiny sizes for a tiny model (``--model`` a small HF directory), results in a temporary
folder unless --out is given; it checks that the benchmark runs, its figures mean nothing.

TTFT: three documents X, Y, Z share most of each prompt; the GPU tier holds exactly one prompt, so a new
document pushes the last one's blocks to the CPU tier. Medians of 3 samples each. Prompts are random
token ids (timings do not depend on the text).
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import engine_vs_hf as vs_hf
from bench.engine_side import DEFAULT_KERNELS, EngineSide, greedy, load_engine_side, random_ids
from bench.hf_side import load_hf
from bench.machine import machine_info
from kvgate.common.models import default_model_path
from kvgate.proto.sampling import SamplingParams
from kvgate.workers.engine import Completion, EngineRequest, LLMEngine, run_to_completion
from kvgate.workers.engine.config import DTYPES


@dataclass(frozen=True)
class EngineSizes:
    """TTFT: ``prompt_tokens`` prompts of which ``shared_tokens`` are the cached document. KV waste:
    ``waste_requests`` requests with prompts and new tokens drawn from the two ranges (inclusive), at most
    8 running, over ``waste_blocks`` GPU blocks."""

    prompt_tokens: int
    shared_tokens: int
    waste_requests: int
    waste_prompt: tuple[int, int]
    waste_new: tuple[int, int]
    waste_blocks: int


FULL = EngineSizes(2047, 1856, 16, (32, 512), (8, 64), 256)  # shared: 116 blocks of 16 = 90.7% of the prompt
SMOKE = EngineSizes(127, 112, 6, (8, 48), (2, 8), 64)


def log(message: str) -> None:
    print(f"[bench/engine] {message}", file=sys.stderr, flush=True)


def run_one(eng: LLMEngine, name: str, prompt: np.ndarray, params: SamplingParams) -> Completion:
    return run_to_completion(eng, [EngineRequest(name, prompt, params)])[name]


def bench_ttft(side: EngineSide, sizes: EngineSizes, rng: np.random.Generator) -> dict[str, Any]:
    """Cold, GPU-tier and CPU-tier time to first token, 3 samples each (see the module docstring)."""
    gpu_blocks = math.ceil((sizes.prompt_tokens + 1) / side.base.block_size)
    eng = side.engine(gpu_blocks=gpu_blocks, cpu_blocks=4 * gpu_blocks)
    docs = {name: random_ids(rng, sizes.shared_tokens, side.vocab_size) for name in "XYZ"}
    plan = ["X cold", "X gpu", "X gpu", "X gpu", "Y cold", "X cpu", "Y cpu", "X cpu", "Z cold"]  # 3 of each
    samples: dict[str, list[dict[str, Any]]] = {"cold": [], "gpu": [], "cpu": []}
    for i, step in enumerate(plan):
        doc, kind = step.split()
        question = random_ids(rng, sizes.prompt_tokens - sizes.shared_tokens, side.vocab_size)
        done = run_one(eng, f"ttft-{i}", np.concatenate([docs[doc], question]), greedy(1))
        usage = done.usage
        samples[kind].append(
            {
                "ttft_s": done.timings.ttft_s,
                "cached_gpu_tokens": usage.cached_gpu_tokens,
                "cached_cpu_tokens": usage.cached_cpu_tokens,
            }
        )
        log(
            f"ttft {side.base.dtype} {step}: {done.timings.ttft_s:.3f} s (cached gpu "
            f"{usage.cached_gpu_tokens}, cpu {usage.cached_cpu_tokens} of {usage.prompt_tokens})"
        )
    medians = {kind: statistics.median(s["ttft_s"] for s in runs) for kind, runs in samples.items()}
    return {
        "prompt_tokens": sizes.prompt_tokens,
        "shared_tokens": sizes.shared_tokens,
        "median_ttft_s": medians,
        "reduction_vs_cold": {k: 1 - v / medians["cold"] for k, v in medians.items() if k != "cold"},
        "kv_counters": vars_of(eng.kv_counters()),
        "samples": samples,
    }


def bench_waste(side: EngineSide, sizes: EngineSizes, rng: np.random.Generator) -> dict[str, Any]:
    """Mixed prompts and output lengths, at most 8 running: allocated-but-unused KV slots, every step."""
    eng = side.engine(gpu_blocks=sizes.waste_blocks, max_num_seqs=8)
    for i in range(sizes.waste_requests):
        params = greedy(int(rng.integers(sizes.waste_new[0], sizes.waste_new[1] + 1)))
        length = int(rng.integers(sizes.waste_prompt[0], sizes.waste_prompt[1] + 1))
        eng.add_request(EngineRequest(f"w{i}", random_ids(rng, length, side.vocab_size), params))
    allocated = unused = steps = 0
    worst = 0.0
    while eng.has_work():
        eng.step()
        waste = eng.kv_waste()
        allocated, unused, steps = allocated + waste.allocated_slots, unused + waste.unused_slots, steps + 1
        worst = max(worst, waste.fraction)
    log(f"kv waste over {steps} steps: {unused / allocated:.2%} (worst step {worst:.2%})")
    return {"requests": sizes.waste_requests, "steps": steps, "waste": unused / allocated,
            "worst_step_waste": worst}  # fmt: skip


def vars_of(record: Any) -> dict[str, Any]:
    return {name: getattr(record, name) for name in record.__slots__}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    formatter = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=formatter)
    parser.add_argument("--vs-hf", action="store_true", help="also run the side-by-side with transformers")
    parser.add_argument("--json", action="store_true", help="print the result as one JSON object")
    parser.add_argument("--dtype", choices=[*DTYPES, "both"], default="both")
    parser.add_argument("--out", type=Path, default=None, help="default: bench/results")
    parser.add_argument("--model", type=Path, default=default_model_path())
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--kernels", default=DEFAULT_KERNELS)
    # One thread by default: on a few shared cores, OpenMP's spinning barriers stall multi-threaded decode
    # for seconds whenever a thread is descheduled (see tests/workers/model/conftest.py).
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, to check the benchmark runs")
    args = parser.parse_args(argv)
    if args.out is None:
        args.out = Path(tempfile.mkdtemp(prefix="kvgate-bench-")) if args.smoke else Path("bench/results")
    return args


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Every part of the benchmark for each dtype asked for; the result object."""
    rng = np.random.default_rng(0)
    sizes, pair_sizes = (SMOKE, vs_hf.SMOKE) if args.smoke else (FULL, vs_hf.FULL)
    result: dict[str, Any] = {
        "machine": machine_info(args.device),
        "model": str(args.model),
        "kernels": args.kernels,
        "smoke": args.smoke,
        "sizes": asdict(sizes),
    }
    rows: list[dict[str, Any]] = []
    ttft: dict[str, Any] = {}
    for dtype in ("float32", "bfloat16") if args.dtype == "both" else (args.dtype,):
        started = time.perf_counter()
        side = load_engine_side(args.model, args.kernels, args.device, dtype)
        log(f"{dtype}: model loaded in {time.perf_counter() - started:.1f} s")
        result.setdefault("gemm", {})[dtype] = side.model.gemm.describe()
        if args.vs_hf:
            rows += pair_side_by_side(side, args, pair_sizes, rng)
        ttft[dtype] = bench_ttft(side, sizes, rng)
        if "kv_waste" not in result:
            result["kv_waste"] = bench_waste(side, sizes, rng)
    if args.vs_hf:
        result["side_by_side"], result["side_by_side_sizes"] = rows, asdict(pair_sizes)
    result["ttft"] = ttft
    return result


def pair_side_by_side(
    side: EngineSide, args: argparse.Namespace, sizes: vs_hf.Sizes, rng: np.random.Generator
) -> list[dict[str, Any]]:
    """The side-by-side rows of ``side``'s dtype, against transformers' load of the same model file."""
    hf = load_hf(args.model, args.device, side.base.torch_dtype)
    return vs_hf.side_by_side(side, hf, sizes, rng)


def markdown(result: dict[str, Any]) -> str:
    m = result["machine"]
    lines = [
        f"# Engine benchmark ({Path(result['model']).name})",
        "",
        f"Machine: {m['cpu_model']} ({m['cores']} cores), device {m['device']} ({m['device_name']}), "
        f"torch threads {m['threads']}, Python {m['python']}, torch {m['torch']}, transformers "
        f"{m['transformers']}, kernels `{result['kernels']}`.",
        "",
        f"Commit `{m['commit']}`; command `{m['command']}`.",
        "",
        "Decode-sized products (measured at load, `--gemm auto`): "
        + "; ".join(f"{dtype}: {plan}" for dtype, plan in result.get("gemm", {}).items()),
        "",
    ]
    if "side_by_side" in result:
        lines += side_by_side_section(result)
    for dtype, t in result["ttft"].items():
        lines += ttft_section(dtype, t)
    w = result["kv_waste"]
    lines += [
        f"## KV waste, mixed workload ({w['requests']} requests, {w['steps']} steps)",
        "",
        f"Allocated-but-unused slots / allocated slots over all steps: **{w['waste']:.2%}** "
        f"(worst step {w['worst_step_waste']:.2%}).",
        "",
    ]
    return "\n".join(lines)


def side_by_side_section(result: dict[str, Any]) -> list[str]:
    s = result["side_by_side_sizes"]
    return [
        "## kvgate engine vs transformers, same batch, threads and dtype, one process",
        "",
        f"Median of {s['runs']} rounds after {s['warmup']} warm-up, engine and transformers alternating; "
        f"decode: {s['new_tokens']} new tokens per sequence, counted after each sequence's first token from "
        "the first new token to the last. Speedup = engine / transformers (throughput).",
        "",
        *vs_hf.markdown_rows(result["side_by_side"]),
        "",
    ]


def ttft_section(dtype: str, t: dict[str, Any]) -> list[str]:
    med, red = t["median_ttft_s"], t["reduction_vs_cold"]
    return [
        f"## Time to first token, {dtype}, {t['prompt_tokens']}-token prompt ({t['shared_tokens']} tokens "
        "shared), median of 3",
        "",
        "| prefix | TTFT s | reduction vs cold |",
        "|---|---:|---:|",
        f"| cold | {med['cold']:.3f} | - |",
        f"| cached in GPU tier | {med['gpu']:.3f} | {red['gpu']:.1%} |",
        f"| cached in CPU tier | {med['cpu']:.3f} | {red['cpu']:.1%} |",
        "",
        "The GPU tier lives on the model's device (host memory when the device is `cpu`); a CPU-tier hit "
        "is copied back into it before the suffix is prefilled.",
        "",
    ]


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    started = time.perf_counter()
    result = run(args)
    result["wall_s"] = time.perf_counter() - started
    args.out.mkdir(parents=True, exist_ok=True)
    name = "engine_vs_hf.json" if args.vs_hf else "engine.json"
    (args.out / name).write_text(json.dumps(result, indent=2) + "\n")
    table = markdown(result)
    (args.out / "engine.md").write_text(table)
    print(json.dumps(result) if args.json else table)
    log(f"done in {result['wall_s']:.0f} s; wrote {args.out / name} and {args.out / 'engine.md'}")


if __name__ == "__main__":
    main()
