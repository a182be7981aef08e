"""KV fetch between workers (default model: SmolLM2-135M-Instruct): what pulling a prompt's cached prefix
from another worker (``GenerateRequest.kv_source`` -> the holder's ``KVWorker.ExportKV``, imported into
the GPU tier) costs against computing it.

    python bench/kv_fetch.py [--model PATH] [--device cpu|cuda] [--threads 1] [--lengths 1024 4096 8192]
                             [--reps 3] [--out bench/results]

Two real workers A and B (``WorkerServer`` each in its own process, same model and secret) on this
machine, driven over gRPC. Per prompt length and repetition, a fresh prompt of random token ids (seeded),
one new token each, TTFT timed at the client:

1. compute: A computes the prompt (nothing cached);
2. fetch: B gets it with ``kv_source`` naming A: B fetches the reusable prefix (whole blocks before the
   last token), imports it and reuses it; checked: B reports that prefix cached, B's import counters
   rise by its blocks and tokens, no fetch fails, A's export counter rises by its blocks;
3. local: B gets it again without ``kv_source`` (the same prefix cached locally).

Fetch time = median(2) - median(3): what the transfer adds over a local hit (both prefill the same last
tokens). KV moved = fetched tokens x the model's KV bytes per token in the worker's KV dtype; the rate is
given in MB/s, in tokens/s of this model and in tokens/s of an 8B Llama-3-class model (128 KiB per
token in bf16: 32 layers x 8 KV heads x 128 x K,V x 2 bytes). A length at or past the model's context
runs as context - 1 (a prompt and its new token must fit: 8192 -> 8191 for SmolLM2). One discarded
warm-up round first (kernels, the B -> A channel). Device: CUDA (bf16, triton kernels) when available,
else CPU (float32). Writes ``kv_fetch.json`` and ``kv_fetch.md`` to --out, naming the machine, commit
and command; prints the Markdown; progress goes to stderr.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.engine_side import CACHE, DEFAULT_KERNELS, random_ids
from bench.machine import git_commit, machine_info
from bench.serve_worker import StreamTiming, WorkerClient, WorkerProcess
from kvgate.common.models import default_model_path
from kvgate.proto import worker_pb2
from kvgate.proto.ids import Epoch, WorkerId
from kvgate.proto.kv_dtype import kv_block_bytes
from kvgate.proto.layout import reusable_tokens
from kvgate.workers.engine import EngineConfig
from kvgate.workers.model.loader import load_config
from kvgate.workers.service import WorkerConfig

LLAMA3_8B_BYTES_PER_TOKEN = 128 * 1024
CASES = ("compute", "fetch", "local")
WARMUP_TOKENS = 512
GPU_BLOCKS = 1024  # 16k tokens: the longest prompt twice over, so the last prompt is never evicted


def log(message: str) -> None:
    print(f"[bench/kv_fetch] {message}", file=sys.stderr, flush=True)


def expect(ok: bool, message: str) -> None:
    """Fail loudly: the fetch path did not do what the benchmark measures."""
    if not ok:
        raise RuntimeError(f"kv fetch check failed: {message}")


def worker_config(args: argparse.Namespace, name: str) -> WorkerConfig:
    """One of the two workers; a fetch deadline far above any transfer here (it is timed, not tested)."""
    engine = EngineConfig(
        CACHE, num_gpu_blocks=GPU_BLOCKS, kernel_backend=args.kernels, device=args.device, dtype=args.dtype
    )
    worker_id, threads = WorkerId(f"bench-kv-{name}"), args.threads
    return WorkerConfig(
        args.model, engine, worker_id, Epoch(1), torch_threads=threads, with_tokenizer=False,
        kv_fetch_timeout_s=300.0,
    )  # fmt: skip


def kv_bytes_per_token(model: Path, engine: EngineConfig) -> int:
    """One token's KV over every layer, K and V, in the engine's KV dtype (scales included)."""
    kv = engine.kv_dtype
    geometry = load_config(model).kv_geometry(kv.storage)
    return kv_block_bytes(geometry, kv, engine.block_size) // engine.block_size


@dataclass(frozen=True)
class Pair:
    """Clients of A (serving at ``a_address``) and B, the prompts' random stream and vocabulary."""

    a: WorkerClient
    b: WorkerClient
    a_address: str
    rng: np.random.Generator
    vocab_size: int


async def one_round(pair: Pair, tokens: int) -> dict[str, float]:
    """The three cases on a fresh ``tokens``-token prompt; their TTFTs. RuntimeError when a check fails."""
    prompt = random_ids(pair.rng, tokens, pair.vocab_size)
    fetched = reusable_tokens(tokens, CACHE.block_size)
    blocks = fetched // CACHE.block_size
    computed = await pair.a.generate(prompt, 1)
    expect(computed.cached_tokens == 0, f"A reused {computed.cached_tokens} tokens of a fresh prompt")
    source = worker_pb2.KVSource(worker_id="bench-kv-a", address=pair.a_address, tokens=fetched)
    b0, a0 = await pair.b.stats(), await pair.a.stats()
    via_fetch = await pair.b.generate(prompt, 1, kv_source=source)
    b1, a1 = await pair.b.stats(), await pair.a.stats()
    expect(via_fetch.cached_tokens == fetched, f"B reused {via_fetch.cached_tokens} of {fetched} fetched")
    counted = (b1.kv_imported_blocks_total - b0.kv_imported_blocks_total,
               b1.kv_imported_tokens_total - b0.kv_imported_tokens_total,
               b1.kv_fetch_failures_total - b0.kv_fetch_failures_total,
               a1.kv_exported_blocks_total - a0.kv_exported_blocks_total)  # fmt: skip
    wanted = (blocks, fetched, 0, blocks)
    expect(counted == wanted, f"(imported blocks, tokens, failures, exported) rose {counted}, not {wanted}")
    local = await pair.b.generate(prompt, 1)
    expect(local.cached_tokens == fetched, f"B's local hit reused {local.cached_tokens} of {fetched}")
    timings: tuple[StreamTiming, ...] = (computed, via_fetch, local)
    return {case: t.ttft_s for case, t in zip(CASES, timings, strict=True)}


def rates(
    prompt_tokens: int, fetched_tokens: int, bytes_per_token: int, median_s: dict[str, float]
) -> dict[str, Any]:
    """The figures of one length from its median TTFTs (``CASES``). Pure. The fetch's rates are None when
    the fetch took no measurable time (median fetch TTFT <= median local TTFT)."""
    fetch_s, moved = median_s["fetch"] - median_s["local"], fetched_tokens * bytes_per_token
    row = {"prompt_tokens": prompt_tokens, "fetched_tokens": fetched_tokens, "kv_bytes": moved,
           "median_ttft_s": median_s, "fetch_s": fetch_s,
           "compute_tokens_s": prompt_tokens / median_s["compute"]}  # fmt: skip
    ok = fetch_s > 0
    return row | {
        "fetch_mb_s": moved / fetch_s / 1e6 if ok else None,
        "fetch_tokens_s": fetched_tokens / fetch_s if ok else None,
        "fetch_llama3_8b_tokens_s": moved / fetch_s / LLAMA3_8B_BYTES_PER_TOKEN if ok else None,
    }


async def measure(args: argparse.Namespace, addresses: tuple[str, ...], geometry: dict[str, int]) -> list:
    """Every length's row (after a discarded warm-up round)."""
    async with WorkerClient(addresses[0], CACHE.secret) as a, WorkerClient(addresses[1], CACHE.secret) as b:
        pair = Pair(a, b, addresses[0], np.random.default_rng(0), geometry["vocab_size"])
        await one_round(pair, WARMUP_TOKENS)
        return [await measure_length(pair, n, args.reps, geometry) for n in args.lengths]


async def measure_length(pair: Pair, requested: int, reps: int, geometry: dict[str, int]) -> dict[str, Any]:
    tokens = min(requested, geometry["context"] - 1)  # the prompt and its new token fit the context
    samples: dict[str, list[float]] = {case: [] for case in CASES}
    for rep in range(reps):
        ttft = await one_round(pair, tokens)
        for case, s in ttft.items():
            samples[case].append(s)
        log(f"{tokens} tokens, rep {rep + 1}: " + ", ".join(f"{c} {s:.4f} s" for c, s in ttft.items()))
    medians = {case: statistics.median(s) for case, s in samples.items()}
    row = rates(tokens, reusable_tokens(tokens, CACHE.block_size), geometry["bytes_per_token"], medians)
    return {"requested_tokens": requested, **row, "samples_s": samples}


def fmt(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def markdown(result: dict[str, Any]) -> str:
    m = result["machine"]
    lines = [
        f"# KV fetch between two workers ({Path(result['model']).name})",
        "",
        f"Device: {m['device_name']} ({m['device']}), dtype {result['dtype']}, KV dtype "
        f"{result['kv_dtype']} ({result['bytes_per_token']} bytes per token), kernels `{result['kernels']}`; "
        f"host {m['cpu_model']} ({m['cores']} cores, {m['threads']} torch threads per worker); "
        f"torch {m['torch']}.",
        "",
        f"Commit `{m['commit']}`; command `{m['command']}`.",
        "",
        f"TTFT at the client in seconds, median over {result['reps']} fresh prompts, 1 new token each. "
        "compute: A computes the prompt; fetch: B fetches A's prefix KV (the fetched tokens) and reuses it; "
        "local: B again, the prefix cached there. Fetch s = fetch - local; MB/s and tokens/s: the fetch's "
        "rate; 8B tokens/s: the same bytes/s at 128 KiB per token (Llama-3-8B-class KV in bf16).",
        "",
        "| prompt | fetched tokens | KV MB | TTFT compute | TTFT fetch | TTFT local | fetch s | MB/s | "
        "tokens/s | 8B tokens/s | compute tokens/s |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in result["rows"]:
        med = r["median_ttft_s"]
        lines.append(
            f"| {r['prompt_tokens']} | {r['fetched_tokens']} | {r['kv_bytes'] / 1e6:.1f} | "
            f"{med['compute']:.4f} | {med['fetch']:.4f} | {med['local']:.4f} | {r['fetch_s']:.4f} | "
            f"{fmt(r['fetch_mb_s'], '.0f')} | {fmt(r['fetch_tokens_s'], '.0f')} | "
            f"{fmt(r['fetch_llama3_8b_tokens_s'], '.0f')} | {r['compute_tokens_s']:.0f} |"
        )
    lines += [
        f"\n{r['requested_tokens']} tokens asked for, run as {r['prompt_tokens']}: a prompt and its new "
        f"token must fit the model's context of {result['context']} tokens."
        for r in result["rows"]
        if r["requested_tokens"] != r["prompt_tokens"]
    ]
    return "\n".join([*lines, ""])


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    formatter = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=formatter)
    parser.add_argument("--model", type=Path, default=default_model_path())
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--threads", type=int, default=1, help="torch threads of each worker")
    parser.add_argument("--lengths", type=int, nargs="+", default=[1024, 4096, 8192])
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--out", type=Path, default=Path("bench/results"))
    args = parser.parse_args(argv)
    cuda = torch.device(args.device).type == "cuda"
    args.dtype, args.kernels = ("bfloat16", "triton") if cuda else ("float32", DEFAULT_KERNELS)
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    started = time.perf_counter()
    machine = machine_info(args.device) | {"commit": git_commit(short=True)}
    config, engine = load_config(args.model), worker_config(args, "a").engine
    geometry = {"context": config.max_position_embeddings, "vocab_size": config.vocab_size,
                "bytes_per_token": kv_bytes_per_token(args.model, engine)}  # fmt: skip
    with ExitStack() as stack:
        addresses = tuple(stack.enter_context(WorkerProcess(worker_config(args, n))) for n in "ab")
        log(f"workers A {addresses[0]}, B {addresses[1]} up after {time.perf_counter() - started:.1f} s")
        rows = asyncio.run(measure(args, addresses, geometry))
    result = {"machine": machine, "model": str(args.model), "dtype": args.dtype,
              "kv_dtype": engine.kv_dtype.name, "kernels": args.kernels, "reps": args.reps,
              "bytes_per_token": geometry["bytes_per_token"], "context": geometry["context"],
              "rows": rows, "wall_s": time.perf_counter() - started}  # fmt: skip
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "kv_fetch.json").write_text(json.dumps(result, indent=2) + "\n")
    (args.out / "kv_fetch.md").write_text(markdown(result))
    print(markdown(result))
    log(f"done in {result['wall_s']:.0f} s; wrote {args.out / 'kv_fetch.json'} and kv_fetch.md")


if __name__ == "__main__":
    main()
