"""Engine benchmark on SmolLM2-135M-Instruct, side by side in one run: time to first token of a ~2k-token
prompt cold vs with >= 90% of it cached in the GPU tier vs in the CPU tier; decode tokens/s of the engine at
batch 1 and 8 vs ``transformers.generate`` at batch 1 on the same machine; KV waste on a mixed workload.

    python bench/engine.py [--out bench/results] [--device cpu|cuda] [--kernels reference|triton]
                           [--threads 1] [--runs 3]

Writes ``engine.json`` and ``engine.md`` to --out; progress goes to stderr. Prompts are random token ids
(timings do not depend on the text). TTFT: medians of 3 samples each; decode: medians of --runs runs.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from kvgate.common.models import DEFAULT_MODEL_ID, default_model_path
from kvgate.kernels import get_kernels
from kvgate.proto.ids import Epoch, WorkerId
from kvgate.proto.layout import CacheLayout
from kvgate.proto.sampling import SamplingParams
from kvgate.workers.engine import (
    Completion,
    EngineConfig,
    EngineRequest,
    LLMEngine,
    SchedulingLimits,
    run_to_completion,
)
from kvgate.workers.kv import StepEventPublisher
from kvgate.workers.model import load_model

CACHE = CacheLayout(DEFAULT_MODEL_ID, secret=b"bench")
PROMPT_LEN, SHARED_LEN = 2047, 1856  # the shared document: 116 blocks of 16 = 90.7% of the prompt
DECODE_TOKENS = 64
RNG = np.random.default_rng(0)


def log(message: str) -> None:
    print(f"[bench/engine] {message}", file=sys.stderr, flush=True)


def ids(n: int) -> np.ndarray:
    return RNG.integers(100, 49_000, size=n).astype(np.uint32)


def engine(args: argparse.Namespace, gpu_blocks: int, cpu_blocks: int = 0, **limits: int) -> LLMEngine:
    """A fresh engine (empty KV tiers) over the model loaded once in ``args.loaded``."""
    config = EngineConfig(
        CACHE,
        num_gpu_blocks=gpu_blocks,
        num_cpu_blocks=cpu_blocks,
        limits=SchedulingLimits(**limits),
        kernel_backend=args.kernels,
        device=args.device,
    )
    model, kernels = args.loaded
    return LLMEngine(config, model, kernels, StepEventPublisher(WorkerId("bench"), Epoch(1)))


def run_one(eng: LLMEngine, name: str, prompt: np.ndarray, params: SamplingParams) -> Completion:
    return run_to_completion(eng, [EngineRequest(name, prompt, params)])[name]


def bench_ttft(args: argparse.Namespace) -> dict[str, Any]:
    """Three documents X, Y, Z of 1856 tokens with 191-token questions. The GPU tier holds exactly one
    2047-token prompt, so a new document pushes the last one's blocks to the CPU tier."""
    eng = engine(args, gpu_blocks=128, cpu_blocks=512)
    docs = {name: ids(SHARED_LEN) for name in "XYZ"}
    plan = ["X cold", "X gpu", "X gpu", "X gpu", "Y cold", "X cpu", "Y cpu", "X cpu", "Z cold"]  # 3 of each
    samples: dict[str, list[dict[str, Any]]] = {"cold": [], "gpu": [], "cpu": []}
    one_token = SamplingParams(temperature=0, max_tokens=1)
    for i, step in enumerate(plan):
        doc, kind = step.split()
        done = run_one(eng, f"ttft-{i}", np.concatenate([docs[doc], ids(PROMPT_LEN - SHARED_LEN)]), one_token)
        usage = done.usage
        samples[kind].append(
            {
                "ttft_s": done.timings.ttft_s,
                "cached_gpu_tokens": usage.cached_gpu_tokens,
                "cached_cpu_tokens": usage.cached_cpu_tokens,
            }
        )
        log(
            f"ttft {step}: {done.timings.ttft_s:.3f} s (cached gpu {usage.cached_gpu_tokens}, "
            f"cpu {usage.cached_cpu_tokens} of {usage.prompt_tokens})"
        )
    medians = {kind: statistics.median(s["ttft_s"] for s in runs) for kind, runs in samples.items() if runs}
    return {
        "prompt_tokens": PROMPT_LEN,
        "shared_tokens": SHARED_LEN,
        "median_ttft_s": medians,
        "reduction_vs_cold": {k: 1 - v / medians["cold"] for k, v in medians.items() if k != "cold"},
        "kv_counters": vars_of(eng.kv_counters()),
        "samples": samples,
    }


def decode_rate(done: list[Completion]) -> float:
    """Tokens after each sequence's first / time from the first first-token to the last finish."""
    start = min(c.timings.first_token_s or 0.0 for c in done)
    end = max(c.timings.finished_s for c in done)
    return sum(len(c.token_ids) - 1 for c in done) / (end - start)


def bench_decode(args: argparse.Namespace, eng: LLMEngine, batch: int) -> float:
    params = SamplingParams(temperature=0, max_tokens=DECODE_TOKENS, ignore_eos=True)
    rates = []
    for run in range(args.runs):
        requests = [EngineRequest(f"d{batch}-{run}-{b}", ids(48), params) for b in range(batch)]
        rates.append(decode_rate(list(run_to_completion(eng, requests).values())))
        log(f"engine decode batch {batch} run {run + 1}: {rates[-1]:.1f} tokens/s")
    return statistics.median(rates)


def bench_transformers(args: argparse.Namespace) -> float:
    """``generate`` at batch 1: (64 - 1) tokens / (time for 64 new tokens - time for 1)."""
    import transformers

    path = Path(args.model)
    auto = transformers.AutoModelForCausalLM
    hf = auto.from_pretrained(path.parent, gguf_file=path.name, dtype=torch.float32).to(args.device).eval()

    def timed(n: int, prompt: torch.Tensor) -> float:
        start = time.perf_counter()
        with torch.inference_mode():
            hf.generate(
                prompt,
                attention_mask=torch.ones_like(prompt),
                do_sample=False,
                max_new_tokens=n,
                min_new_tokens=n,
            )
        if args.device.startswith("cuda"):
            torch.cuda.synchronize()
        return time.perf_counter() - start

    rates = []
    for run in range(args.runs):
        prompt = torch.from_numpy(ids(48).astype(np.int64))[None].to(args.device)  # [1, 48]
        rates.append((DECODE_TOKENS - 1) / (timed(DECODE_TOKENS, prompt) - timed(1, prompt)))
        log(f"transformers decode batch 1 run {run + 1}: {rates[-1]:.1f} tokens/s")
    return statistics.median(rates)


def bench_waste(args: argparse.Namespace) -> dict[str, Any]:
    """16 requests, prompts of 32-512 tokens, 8-64 new tokens, at most 8 running: waste sampled each step."""
    eng = engine(args, gpu_blocks=256, max_num_seqs=8)
    for i in range(16):
        params = SamplingParams(temperature=0, max_tokens=int(RNG.integers(8, 65)), ignore_eos=True)
        eng.add_request(EngineRequest(f"w{i}", ids(int(RNG.integers(32, 513))), params))
    allocated = unused = steps = 0
    worst = 0.0
    while eng.has_work():
        eng.step()
        waste = eng.kv_waste()
        allocated, unused, steps = allocated + waste.allocated_slots, unused + waste.unused_slots, steps + 1
        worst = max(worst, waste.fraction)
    log(f"kv waste over {steps} steps: {unused / allocated:.2%} (worst step {worst:.2%})")
    return {"requests": 16, "steps": steps, "waste": unused / allocated, "worst_step_waste": worst}


def vars_of(record: Any) -> dict[str, Any]:
    return {name: getattr(record, name) for name in record.__slots__}


def markdown(result: dict[str, Any]) -> str:
    t, d, w, m = result["ttft"], result["decode"], result["kv_waste"], result["machine"]
    med, red = t["median_ttft_s"], t["reduction_vs_cold"]
    lines = [
        "# Engine benchmark (SmolLM2-135M-Instruct)",
        "",
        f"Machine: {m['machine']}, Python {m['python']}, torch {m['torch']}, {m['cpus']} CPUs, "
        f"torch threads: {m['threads']}, device {m['device']}, kernels {m['kernels']}",
        "",
        f"## Time to first token, {t['prompt_tokens']}-token prompt ({t['shared_tokens']} tokens shared), "
        f"median of 3",
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
        f"## Decode, {DECODE_TOKENS} new tokens after a 48-token prompt, median of {m['runs']}",
        "",
        "| runner | tokens/s | vs transformers batch 1 |",
        "|---|---:|---:|",
        f"| transformers.generate, batch 1 | {d['transformers_b1']:.1f} | 1.00x |",
        f"| engine, batch 1 | {d['engine_b1']:.1f} | {d['engine_b1'] / d['transformers_b1']:.2f}x |",
        f"| engine, batch 8 | {d['engine_b8']:.1f} | {d['engine_b8'] / d['transformers_b1']:.2f}x |",
        "",
        f"## KV waste, mixed workload ({w['requests']} requests, {w['steps']} steps)",
        "",
        f"Allocated-but-unused slots / allocated slots over all steps: **{w['waste']:.2%}** "
        f"(worst step {w['worst_step_waste']:.2%}).",
        "",
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--out", type=Path, default=Path("bench/results"))
    parser.add_argument("--model", default=str(default_model_path()))
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--kernels", default="reference")
    # One thread by default: on a few shared cores, OpenMP's spinning barriers stall multi-threaded decode
    # for seconds whenever a thread is descheduled (see tests/workers/model/conftest.py).
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--runs", type=int, default=3, choices=(1, 2, 3))
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    started = time.perf_counter()
    kernels = get_kernels(args.kernels)
    args.loaded = load_model(args.model, kernels, device=args.device), kernels
    log(f"model loaded in {time.perf_counter() - started:.1f} s")
    ttft = bench_ttft(args)
    decode_engine = engine(args, gpu_blocks=256)
    decode = {
        "engine_b1": bench_decode(args, decode_engine, 1),
        "engine_b8": bench_decode(args, decode_engine, 8),
        "transformers_b1": bench_transformers(args),
    }
    result = {
        "machine": {
            "machine": platform.machine(),
            "python": platform.python_version(),
            "torch": torch.__version__,
            "cpus": os.cpu_count(),
            "threads": args.threads,
            "device": args.device,
            "kernels": args.kernels,
            "runs": args.runs,
        },
        "ttft": ttft,
        "decode": decode,
        "kv_waste": bench_waste(args),
        "wall_s": time.perf_counter() - started,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    suffix = "" if args.device == "cpu" else f"_{args.device.replace(':', '')}"
    (args.out / f"engine{suffix}.json").write_text(json.dumps(result, indent=2) + "\n")
    table = markdown(result)
    (args.out / f"engine{suffix}.md").write_text(table)
    print(table)
    log(f"done in {result['wall_s']:.0f} s")


if __name__ == "__main__":
    main()
