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
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.engine_side import CACHE, DEFAULT_KERNELS
from bench.hf_side import load_hf
from bench.machine import machine_info
from bench.serve_cases import Bench, ServeSizes, log, run_cases
from bench.serve_worker import WorkerProcess
from kvgate.common.models import default_model_path
from kvgate.proto.ids import Epoch, WorkerId
from kvgate.workers.engine import EngineConfig, SchedulingLimits
from kvgate.workers.model.loader import load_config
from kvgate.workers.service import WorkerConfig

FULL = ServeSizes((2048, 8192, 32768), (1, 8, 32, 64), decode_prompt=128, new_tokens=128, runs=3)
# the tiny test model's context is 512 tokens: the 1024-token case is skipped, as 32k is with SmolLM2
SMOKE = ServeSizes((32, 96, 1024), (1, 4), decode_prompt=16, new_tokens=16, runs=1, gpu_blocks=128)


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
    started, machine = time.perf_counter(), machine_info(args.device)  # the commit the run starts at
    sizes = SMOKE if args.smoke else FULL
    config = load_config(args.model)
    with WorkerProcess(worker_config(args, sizes)) as address:
        log(f"worker serving at {address} after {time.perf_counter() - started:.1f} s")
        hf = load_hf(args.model, args.device, getattr(torch, args.dtype))
        context, vocab = config.max_position_embeddings, config.vocab_size
        bench = Bench(args.device, sizes, hf, context, vocab, np.random.default_rng(0))
        cases = asyncio.run(run_cases(bench, address))
    result = {"machine": machine, "model": str(args.model), "dtype": args.dtype,
              "kernels": args.kernels, "context": config.max_position_embeddings, "smoke": args.smoke,
              "sizes": asdict(sizes), **cases, "wall_s": time.perf_counter() - started}  # fmt: skip
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "gpu_serve.json").write_text(json.dumps(result, indent=2) + "\n")
    (args.out / "gpu_serve.md").write_text(markdown(result))
    print(markdown(result))
    log(f"done in {result['wall_s']:.0f} s; wrote {args.out / 'gpu_serve.json'} and gpu_serve.md")


if __name__ == "__main__":
    main()
