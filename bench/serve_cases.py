"""The cases of the serving benchmark (``bench/gpu_serve.py``): time to first token cold and cached, and
decode tokens/s, each measured on a running worker over gRPC and on transformers in this process, in
alternating rounds. Every case returns a JSON-ready dict: its figures, or ``skipped`` with the reason."""

from __future__ import annotations

import math
import statistics
import sys
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from bench.engine_side import CACHE, random_ids
from bench.hf_side import hf_cached_ttft_s, hf_decode, hf_prefill_s, hf_prefix_cache
from bench.serve_worker import NoSteadyWindowError, WorkerClient, steady_decode


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


def log(message: str) -> None:
    print(f"[bench/gpu_serve] {message}", file=sys.stderr, flush=True)


@dataclass(frozen=True)
class Bench:
    """One run's fixed parts: the device, the sizes, transformers' model, the model's context and
    vocabulary, the random stream of the prompts."""

    device: str
    sizes: ServeSizes
    hf: Any
    context: int
    vocab_size: int
    rng: np.random.Generator

    def prompt(self, n: int) -> np.ndarray:
        return random_ids(self.rng, n, self.vocab_size)

    def on_device(self, *prompts: np.ndarray) -> torch.Tensor:
        return torch.from_numpy(np.stack(prompts).astype(np.int64)).to(self.device)  # [B, L]

    def too_long(self, tokens: int) -> str | None:
        """Why a sequence of ``tokens`` (prompt + new) cannot run; None when it can."""
        if tokens <= self.context:
            return None
        return (
            f"{tokens} tokens (prompt + new) exceed the model's context of {self.context} "
            "(max_position_embeddings); pass --model with a longer-context model"
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


async def worker_decode(
    client: WorkerClient, prompts: list[np.ndarray], new_tokens: int, tries: int = 3
) -> float:
    """The worker's steady decode tokens/s over ``prompts`` sent at once. A run whose streams never all
    decoded together (on a busy host the first can finish before the last is admitted) has no steady
    window: it is run again, up to ``tries`` times, and NoSteadyWindowError follows the last."""
    for attempt in range(1, tries):
        try:
            return steady_decode(await client.batch(prompts, new_tokens)).rate
        except NoSteadyWindowError as error:
            log(f"decode batch {len(prompts)}: {error}; run again ({attempt}/{tries - 1})")
    return steady_decode(await client.batch(prompts, new_tokens)).rate


async def decode_case(bench: Bench, client: WorkerClient, batch: int) -> dict[str, Any]:
    """Decode tokens/s at ``batch`` on both sides (see the module docstring)."""
    sizes = bench.sizes
    case: dict[str, Any] = {"case": f"decode_b{batch}", "batch": batch, "prompt_tokens": sizes.decode_prompt}
    if (reason := bench.too_long(sizes.decode_prompt + sizes.new_tokens)) is not None:
        log(f"decode batch {batch}: skipped: {reason}")
        return case | {"skipped": reason}
    worker: list[float] = []
    hf: list[float] = []
    for run in range(sizes.warmup + sizes.runs):
        prompts = [bench.prompt(sizes.decode_prompt) for _ in range(batch)]
        for side in ("worker", "hf") if run % 2 == 0 else ("hf", "worker"):
            if side == "worker":
                worker.append(await worker_decode(client, prompts, sizes.new_tokens))
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
