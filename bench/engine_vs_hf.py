"""The kvgate engine against Hugging Face ``transformers`` in one process: the same model file, device,
dtype, batch and torch threads on both sides, each case measured with the same method on both.

- ``prefill_<n>``: prompt tokens/s of one cold ``n``-token prompt (wall time to its first new token).
- ``decode_b<B>_ctx<C>``: generated tokens/s of a batch of ``B`` sequences with ``C``-token prompts,
  counting the tokens after each sequence's first over the time from the first new token to the last.
  The engine prefills the whole batch in one step (its token budget is raised to fit), as
  ``generate`` prefills it in one forward, so both sides decode ``B`` sequences in lockstep.

Every case runs warm-up rounds (discarded), then measured rounds; each round runs both sides, alternating
which goes first, so that machine noise falls on both. The figure is the median of the rounds; speedup is
engine / transformers as throughput (> 1: the engine is faster). Prompts are fresh random ids every run,
so the engine's prefix cache never helps (the cached case is the TTFT benchmark's).
"""

from __future__ import annotations

import math
import statistics
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from bench.engine_side import EngineSide, engine_decode, engine_prefill_s, random_ids
from bench.hf_side import hf_decode, hf_prefill_s
from kvgate.workers.engine import LLMEngine


@dataclass(frozen=True)
class Sizes:
    """What the side-by-side runs: a ``prefill_tokens`` prompt; decode at each (batch, context) of
    ``decode`` for ``new_tokens`` (>= 2) tokens; ``warmup`` discarded and ``runs`` measured rounds."""

    prefill_tokens: int
    decode: tuple[tuple[int, int], ...]
    new_tokens: int
    runs: int
    warmup: int = 1


FULL = Sizes(2048, ((1, 64), (8, 64), (8, 1024)), new_tokens=64, runs=5)
SMOKE = Sizes(48, ((1, 16), (8, 16), (8, 48)), new_tokens=6, runs=1)


@dataclass(frozen=True)
class Case:
    """One comparison: ``engine(run)`` and ``hf(run)`` each measure one fresh run as a throughput."""

    name: str
    unit: str
    engine: Callable[[int], float]
    hf: Callable[[int], float]


def log(message: str) -> None:
    print(f"[bench/engine --vs-hf] {message}", file=sys.stderr, flush=True)


def side_by_side(side: EngineSide, hf: Any, sizes: Sizes, rng: np.random.Generator) -> list[dict[str, Any]]:
    """One row per case (``case``, ``dtype``, ``engine``, ``hf``, ``unit``, ``speedup`` and the rounds)
    for the model ``side`` and ``hf`` both hold, in ``side``'s dtype."""
    eng = _engine_for(side, sizes)
    return [_row(case, side.base.dtype, sizes) for case in _cases(side, eng, hf, sizes, rng)]


def _engine_for(side: EngineSide, sizes: Sizes) -> LLMEngine:
    """An engine whose GPU tier holds the largest case and whose step takes a whole batch's prefill."""
    blocks = max(
        [math.ceil((sizes.prefill_tokens + 1) / side.base.block_size)]
        + [b * math.ceil((c + sizes.new_tokens) / side.base.block_size) for b, c in sizes.decode]
    )
    budget = max([2048, sizes.prefill_tokens] + [b * c for b, c in sizes.decode])
    per_seq = max(2048, sizes.prefill_tokens)
    return side.engine(blocks + 8, max_tokens_per_step=budget, max_prefill_tokens_per_step=per_seq)


def _cases(side: EngineSide, eng: LLMEngine, hf: Any, sizes: Sizes, rng: np.random.Generator) -> list[Case]:
    device = side.base.torch_device

    def prompts(batch: int, length: int) -> list[np.ndarray]:
        return [random_ids(rng, length, side.vocab_size) for _ in range(batch)]

    def on_device(batch: list[np.ndarray]) -> torch.Tensor:
        return torch.from_numpy(np.stack(batch).astype(np.int64)).to(device)  # [B, L]

    n = sizes.prefill_tokens
    cases = [
        Case(
            f"prefill_{n}",
            "prompt tokens/s",
            lambda run: n / engine_prefill_s(eng, f"prefill-{run}", prompts(1, n)[0]),
            lambda run: n / hf_prefill_s(hf, on_device(prompts(1, n))),
        )
    ]
    for batch, context in sizes.decode:

        def engine_rate(run: int, b: int = batch, c: int = context) -> float:
            return engine_decode(eng, f"decode-{b}-{c}-{run}", prompts(b, c), sizes.new_tokens).rate

        def hf_rate(run: int, b: int = batch, c: int = context) -> float:
            return hf_decode(hf, on_device(prompts(b, c)), sizes.new_tokens).rate

        cases.append(Case(f"decode_b{batch}_ctx{context}", "generated tokens/s", engine_rate, hf_rate))
    return cases


def _row(case: Case, dtype: str, sizes: Sizes) -> dict[str, Any]:
    """Measures ``case`` in alternating rounds; the medians of the measured rounds and their ratio."""
    engine_runs: list[float] = []
    hf_runs: list[float] = []
    for run in range(sizes.warmup + sizes.runs):
        sides = [(case.engine, engine_runs), (case.hf, hf_runs)]
        for measure, into in sides if run % 2 == 0 else sides[::-1]:
            into.append(measure(run))
        kind = "warm-up" if run < sizes.warmup else "run"
        log(f"{case.name} {dtype} {kind} {run + 1}: engine {engine_runs[-1]:.1f}, hf {hf_runs[-1]:.1f}")
    del engine_runs[: sizes.warmup], hf_runs[: sizes.warmup]
    engine, hf = statistics.median(engine_runs), statistics.median(hf_runs)
    return {
        "case": case.name,
        "dtype": dtype,
        "engine": engine,
        "hf": hf,
        "unit": case.unit,
        "speedup": engine / hf,
        "engine_runs": engine_runs,
        "hf_runs": hf_runs,
    }


def markdown_rows(rows: list[dict[str, Any]]) -> list[str]:
    """The side-by-side table."""
    lines = [
        "| case | dtype | kvgate engine | transformers (sdpa) | unit | speedup |",
        "|---|---|---:|---:|---|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['case']} | {r['dtype']} | {r['engine']:.1f} | {r['hf']:.1f} | {r['unit']} | "
            f"{r['speedup']:.2f}x |"
        )
    return lines
