"""Serving benchmark on one GPU: a real kvgate worker (``WorkerServer`` in a child process, driven over
gRPC) against Hugging Face ``transformers`` on the same device, in the same dtype (bf16) and batch.

    python bench/gpu_serve.py [--model PATH] [--out bench/results] [--kernels triton] [--kv-fraction 0.5]
    python bench/gpu_serve.py --smoke --model TINY_HF_DIR [--out DIR]     # CPU, tiny sizes, < 1 minute

Measures, each against transformers (``generate``, SDPA):

- TTFT cold vs cached at 2k, 8k and 32k prompt tokens: a fresh document plus a question (cold), then the
  same document with another question (cached: ~90% of the prompt is the document). Worker: client-side
  time from the call to the first token. transformers: ``generate`` for one token, cold; cached, with a
  copy of the document's KV cache computed beforehand (the way to reuse a prefix across requests there).
- Decode tokens/s at batch 1, 8, 32 and 64 (128-token prompts, 128 new tokens each): all streams sent at
  once; the tokens that arrive while every stream is decoding, over that window. transformers: the
  batch's tokens after the first, from the first new token to the last (the same count in lockstep).

Medians of 3 rounds after 1 warm-up, worker and transformers alternating. Writes ``gpu_serve.json`` and
``gpu_serve.md`` to --out with the device name, commit and command; progress goes to stderr. The whole
run fits in 10 minutes on an H200 with the default model.

Model and context: the default ``--model`` is kvgate's default model, SmolLM2-135M-Instruct, whose
context is 8192 tokens (``max_position_embeddings``), so the 32k case is skipped and the output says why.
Point ``--model`` at a longer-context model (a ``.gguf`` file or a safetensors directory, e.g. a Llama 3.x
checkpoint with a 128k context) to run it. A case whose prompt and new tokens exceed the model's context
is skipped on both sides with the reason in the results.

Without ``--smoke`` a CUDA device is required (the script exits with an error naming the problem).
``--smoke`` runs the same code on CPU in float32 with tiny sizes, on a tiny model (a safetensors
directory, e.g. the tests' tiny chat model): it checks that the benchmark runs, its figures mean nothing.
"""

from __future__ import annotations

import argparse
import asyncio
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

from bench.engine_side import CACHE, DEFAULT_KERNELS, random_ids
from bench.hf_side import hf_cached_ttft_s, hf_decode, hf_prefill_s, hf_prefix_cache, load_hf
from bench.machine import machine_info
from bench.serve_worker import WorkerClient, WorkerProcess, steady_decode
from kvgate.common.models import default_model_path
from kvgate.proto.ids import Epoch, WorkerId
from kvgate.workers.engine import EngineConfig, SchedulingLimits
from kvgate.workers.model.loader import load_config
from kvgate.workers.service import WorkerConfig


@dataclass(frozen=True)
class ServeSizes:
    """TTFT at each of ``ttft_prompts`` tokens; decode at each of ``decode_batches`` with
    ``decode_prompt``-token prompts and ``new_tokens`` (>= 3) new tokens; ``warmup`` discarded and
    ``runs`` measured rounds; ``gpu_blocks``: the worker's fixed GPU tier (None: ``--kv-fraction``)."""

    ttft_prompts: tuple[int, ...]
    decode_batches: tuple[int, ...]
    decode_prompt: int
    new_tokens: int
    runs: int
    warmup: int = 1
    gpu_blocks: int | None = None


FULL = ServeSizes((2048, 8192, 32768), (1, 8, 32, 64), decode_prompt=128, new_tokens=128, runs=3)
# the tiny test model's context is 512 tokens: the 1024-token case is skipped, as 32k is with SmolLM2
SMOKE = ServeSizes((32, 96, 1024), (1, 4), decode_prompt=16, new_tokens=8, runs=1, gpu_blocks=128)


def log(message: str) -> None:
    print(f"[bench/gpu_serve] {message}", file=sys.stderr, flush=True)


@dataclass(frozen=True)
class Bench:
    """One run's fixed parts: the arguments, the sizes, transformers' model, the model's context."""

    args: argparse.Namespace
    sizes: ServeSizes
    hf: Any
    context: int
    vocab_size: int
    rng: np.random.Generator

    def prompt(self, n: int) -> np.ndarray:
        return random_ids(self.rng, n, self.vocab_size)

    def on_device(self, *prompts: np.ndarray) -> torch.Tensor:
        return torch.from_numpy(np.stack(prompts).astype(np.int64)).to(self.args.device)  # [B, L]

    def too_long(self, tokens: int) -> str | None:
        """Why a sequence of ``tokens`` (prompt + new) cannot run; None when it can."""
        if tokens <= self.context:
            return None
        return (
            f"{tokens} tokens (prompt + new) exceed the model's context of {self.context} "
            "(max_position_embeddings); pass --model with a longer-context model"
        )


def worker_config(args: argparse.Namespace, sizes: ServeSizes) -> WorkerConfig:
    """The worker: every decode batch runs at once and its prompts prefill in one step, as
    ``generate`` prefills a batch in one forward; torch threads as this process has them (call it after
    ``torch.set_num_threads``); no tokenizer (token ids go in and out)."""
    budget = max(2048, max(sizes.decode_batches) * sizes.decode_prompt)
    tier: dict[str, Any] = (
        {"num_gpu_blocks": sizes.gpu_blocks}
        if sizes.gpu_blocks is not None
        else {"gpu_memory_fraction": args.kv_fraction}
    )
    engine = EngineConfig(
        CACHE,
        **tier,
        limits=SchedulingLimits(max_num_seqs=max(sizes.decode_batches), max_tokens_per_step=budget),
        kernel_backend=args.kernels,
        device=args.device,
        dtype=args.dtype,
    )
    threads = torch.get_num_threads()  # the worker's, as transformers' in this process
    return WorkerConfig(
        args.model, engine, WorkerId("bench-gpu-serve"), Epoch(1), torch_threads=threads, with_tokenizer=False
    )


async def ttft_case(bench: Bench, client: WorkerClient, tokens: int) -> dict[str, Any]:
    """Cold and cached TTFT of ``tokens``-token prompts on both sides (see the module docstring)."""
    case: dict[str, Any] = {"case": f"ttft_{tokens}", "prompt_tokens": tokens}
    if (reason := bench.too_long(tokens + 1)) is not None:
        log(f"ttft {tokens}: skipped: {reason}")
        return case | {"skipped": reason}
    shared = min(tokens - 1, math.ceil(0.9 * tokens / CACHE.block_size) * CACHE.block_size)
    runs: dict[str, list[float]] = {"worker_cold": [], "worker_cached": [], "hf_cold": [], "hf_cached": []}
    reused: list[int] = []
    for run in range(bench.sizes.warmup + bench.sizes.runs):
        doc = bench.prompt(shared)
        cold, warm = (np.concatenate([doc, bench.prompt(tokens - shared)]) for _ in range(2))
        sides = ["worker", "hf"] if run % 2 == 0 else ["hf", "worker"]
        for side in sides:
            if side == "worker":
                cold_s, cached_s, cached_tokens = await _worker_ttft(client, cold, warm)
                reused.append(cached_tokens)
            else:
                cold_s, cached_s = _hf_ttft(bench, doc, cold, warm)
            runs[f"{side}_cold"].append(cold_s)
            runs[f"{side}_cached"].append(cached_s)
        log(f"ttft {tokens} round {run + 1}: " + ", ".join(f"{k} {v[-1]:.4f} s" for k, v in runs.items()))
    for values in [*runs.values(), reused]:
        del values[: bench.sizes.warmup]
    medians = {k: statistics.median(v) for k, v in runs.items()}
    return case | {"shared_tokens": shared, "worker_cached_tokens": reused, "median_s": medians,
                   "runs_s": runs, "speedup_cold": medians["hf_cold"] / medians["worker_cold"],
                   "speedup_cached": medians["hf_cached"] / medians["worker_cached"],
                   "worker_reduction": 1 - medians["worker_cached"] / medians["worker_cold"]}  # fmt: skip


async def _worker_ttft(client: WorkerClient, cold: np.ndarray, warm: np.ndarray) -> tuple[float, float, int]:
    """The worker's TTFT of ``cold`` (its document is new), then of ``warm`` (same document), and the
    prompt tokens it reused for ``warm``."""
    first = await client.generate(cold, 1)
    second = await client.generate(warm, 1)
    return first.ttft_s, second.ttft_s, second.cached_tokens


def _hf_ttft(bench: Bench, doc: np.ndarray, cold: np.ndarray, warm: np.ndarray) -> tuple[float, float]:
    """transformers' TTFT of ``cold``, then of ``warm`` with a copy of ``doc``'s cache (made untimed)."""
    cold_s = hf_prefill_s(bench.hf, bench.on_device(cold))
    cache = hf_prefix_cache(bench.hf, bench.on_device(doc))
    return cold_s, hf_cached_ttft_s(bench.hf, cache, bench.on_device(warm))


async def decode_case(bench: Bench, client: WorkerClient, batch: int) -> dict[str, Any]:
    """Decode tokens/s at ``batch`` on both sides (see the module docstring)."""
    sizes = bench.sizes
    case: dict[str, Any] = {"case": f"decode_b{batch}", "batch": batch, "prompt_tokens": sizes.decode_prompt}
    if (reason := bench.too_long(sizes.decode_prompt + sizes.new_tokens)) is not None:
        return case | {"skipped": reason}
    worker: list[float] = []
    hf: list[float] = []
    for run in range(sizes.warmup + sizes.runs):
        prompts = [bench.prompt(sizes.decode_prompt) for _ in range(batch)]
        for side in ("worker", "hf") if run % 2 == 0 else ("hf", "worker"):
            if side == "worker":
                worker.append(steady_decode(await client.batch(prompts, sizes.new_tokens)).rate)
            else:
                hf.append(hf_decode(bench.hf, bench.on_device(*prompts), sizes.new_tokens).rate)
        log(f"decode batch {batch} round {run + 1}: worker {worker[-1]:.1f}, hf {hf[-1]:.1f} tokens/s")
    del worker[: sizes.warmup], hf[: sizes.warmup]
    w, h = statistics.median(worker), statistics.median(hf)
    return case | {"new_tokens": sizes.new_tokens, "worker_tokens_s": w, "hf_tokens_s": h,
                   "speedup": w / h, "worker_runs": worker, "hf_runs": hf}  # fmt: skip


async def run_cases(bench: Bench, address: str) -> dict[str, list[dict[str, Any]]]:
    async with WorkerClient(address, CACHE.secret) as client:
        ttft = [await ttft_case(bench, client, n) for n in bench.sizes.ttft_prompts]
        decode = [await decode_case(bench, client, b) for b in bench.sizes.decode_batches]
    return {"ttft": ttft, "decode": decode}


def markdown(result: dict[str, Any]) -> str:
    m = result["machine"]
    lines = [
        f"# Serving benchmark: kvgate worker over gRPC vs transformers ({Path(result['model']).name})",
        "",
        f"Device: {m['device_name']} ({m['device']}), dtype {result['dtype']}, "
        f"kernels `{result['kernels']}`; "
        f"host {m['cpu_model']} ({m['cores']} cores, {m['threads']} torch threads); torch {m['torch']}, "
        f"transformers {m['transformers']}. Model context: {result['context']} tokens.",
        "",
        f"Commit `{m['commit']}`; command `{m['command']}`.",
        "",
        "## Time to first token, cold and with ~90% of the prompt cached (seconds, median)",
        "",
        "| prompt | worker cold | worker cached | reduction | transformers cold | transformers cached | "
        "speedup cold | speedup cached |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for c in result["ttft"]:
        if "skipped" in c:
            lines.append(f"| {c['prompt_tokens']} | skipped: {c['skipped']} | | | | | | |")
            continue
        s = c["median_s"]
        lines.append(
            f"| {c['prompt_tokens']} | {s['worker_cold']:.4f} | {s['worker_cached']:.4f} | "
            f"{c['worker_reduction']:.1%} | {s['hf_cold']:.4f} | {s['hf_cached']:.4f} | "
            f"{c['speedup_cold']:.2f}x | {c['speedup_cached']:.2f}x |"
        )
    lines += ["", "## Decode, generated tokens/s (median)", "",
              "| batch | worker | transformers | speedup |", "|---:|---:|---:|---:|"]  # fmt: skip
    for c in result["decode"]:
        if "skipped" in c:
            lines.append(f"| {c['batch']} | skipped: {c['skipped']} | | |")
            continue
        lines.append(
            f"| {c['batch']} | {c['worker_tokens_s']:.1f} | {c['hf_tokens_s']:.1f} | {c['speedup']:.2f}x |"
        )
    lines += [
        "",
        "Speedup: transformers' time / the worker's (TTFT), the worker's rate / transformers' (decode).",
        "",
    ]
    return "\n".join(lines)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    formatter = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=formatter)
    parser.add_argument("--model", type=Path, default=default_model_path())
    parser.add_argument("--out", type=Path, default=None, help="default: bench/results")
    parser.add_argument("--kernels", default=None, help="default: triton on GPU, EngineConfig's on --smoke")
    parser.add_argument("--kv-fraction", type=float, default=0.5, help="of free GPU memory, for the KV tier")
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    parser.add_argument("--smoke", action="store_true", help="CPU, tiny sizes: check that the benchmark runs")
    args = parser.parse_args(argv)
    if not args.smoke and not torch.cuda.is_available():
        parser.error(
            "no CUDA device is available: this benchmark needs a GPU (or --smoke, which runs on CPU)"
        )
    args.device, args.dtype = ("cpu", "float32") if args.smoke else ("cuda", "bfloat16")
    args.kernels = args.kernels or (DEFAULT_KERNELS if args.smoke else "triton")
    if args.out is None:
        args.out = Path(tempfile.mkdtemp(prefix="kvgate-gpu-serve-")) if args.smoke else Path("bench/results")
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    started = time.perf_counter()
    sizes = SMOKE if args.smoke else FULL
    config = load_config(args.model)
    with WorkerProcess(worker_config(args, sizes)) as address:
        log(f"worker serving at {address} after {time.perf_counter() - started:.1f} s")
        hf = load_hf(args.model, args.device, getattr(torch, args.dtype))
        bench = Bench(
            args, sizes, hf, config.max_position_embeddings, config.vocab_size, np.random.default_rng(0)
        )
        cases = asyncio.run(run_cases(bench, address))
    result = {"machine": machine_info(args.device), "model": str(args.model), "dtype": args.dtype,
              "kernels": args.kernels, "context": config.max_position_embeddings, "smoke": args.smoke,
              "sizes": asdict(sizes), **cases, "wall_s": time.perf_counter() - started}  # fmt: skip
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "gpu_serve.json").write_text(json.dumps(result, indent=2) + "\n")
    (args.out / "gpu_serve.md").write_text(markdown(result))
    print(markdown(result))
    log(f"done in {result['wall_s']:.0f} s; wrote {args.out / 'gpu_serve.json'} and gpu_serve.md")


if __name__ == "__main__":
    main()
