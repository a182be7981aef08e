"""The kvgate engine's side of the in-process benchmarks: one model loaded once (device, dtype and kernel
backend as an :class:`EngineConfig` names them), fresh engines over it, random prompts and the timing
rules shared with ``bench/hf_side.py``."""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from bench.hf_side import DecodeRun
from kvgate.common.models import DEFAULT_MODEL_ID
from kvgate.kernels import get_kernels
from kvgate.kernels.protocol import AttentionKernels
from kvgate.proto.ids import Epoch, WorkerId
from kvgate.proto.layout import CacheLayout
from kvgate.proto.sampling import SamplingParams
from kvgate.workers.engine import (
    DEFAULT_KERNEL_BACKEND,
    Completion,
    EngineConfig,
    EngineRequest,
    LLMEngine,
    SchedulingLimits,
    run_to_completion,
)
from kvgate.workers.kv import StepEventPublisher
from kvgate.workers.model import load_model
from kvgate.workers.model.decoder import DecoderModel

CACHE = CacheLayout(DEFAULT_MODEL_ID, secret=b"bench")
DEFAULT_KERNELS = DEFAULT_KERNEL_BACKEND


@dataclass(frozen=True)
class EngineSide:
    """A model loaded once; ``engine`` builds engines with empty KV tiers over it. ``base`` holds the
    settings every engine shares (device, dtype, kernel backend); its block counts are replaced."""

    base: EngineConfig
    model: DecoderModel
    kernels: AttentionKernels

    @property
    def vocab_size(self) -> int:
        return self.model.config.vocab_size

    def engine(self, gpu_blocks: int, cpu_blocks: int = 0, **limits: int) -> LLMEngine:
        """A fresh engine: ``gpu_blocks`` / ``cpu_blocks`` per tier, ``limits`` as in SchedulingLimits."""
        config = dataclasses.replace(
            self.base, num_gpu_blocks=gpu_blocks, num_cpu_blocks=cpu_blocks, limits=SchedulingLimits(**limits)
        )
        return LLMEngine(config, self.model, self.kernels, StepEventPublisher(WorkerId("bench"), Epoch(1)))


def load_engine_side(model_path: Path, kernels: str, device: str, dtype: str) -> EngineSide:
    """The model at ``model_path`` loaded as an engine with these settings would load it."""
    base = EngineConfig(CACHE, num_gpu_blocks=1, kernel_backend=kernels, device=device, dtype=dtype)
    backend = get_kernels(base.kernel_backend)
    model = load_model(model_path, backend, device=base.torch_device, dtype=base.torch_dtype, gemm=base.gemm)
    return EngineSide(base, model, backend)


def random_ids(rng: np.random.Generator, n: int, vocab_size: int) -> np.ndarray:
    """``n`` random token ids of ordinary (non-special) tokens: timings do not depend on the text."""
    low = min(100, vocab_size // 4)
    return rng.integers(low, min(49_000, vocab_size), size=n).astype(np.uint32)


def greedy(max_tokens: int) -> SamplingParams:
    return SamplingParams(temperature=0, max_tokens=max_tokens, ignore_eos=True)


def engine_prefill_s(eng: LLMEngine, name: str, prompt: np.ndarray) -> float:
    """Wall seconds from adding ``prompt`` to its first (only) new token: a cold prefill when no prefix
    of ``prompt`` is cached."""
    start = time.perf_counter()
    run_to_completion(eng, [EngineRequest(name, prompt, greedy(1))])
    return time.perf_counter() - start


def engine_decode(eng: LLMEngine, name: str, prompts: list[np.ndarray], new_tokens: int) -> DecodeRun:
    """``new_tokens`` (>= 2) greedy tokens after each of ``prompts``, added together (one batch), timed
    from the first new token of any of them to the last finish."""
    requests = [EngineRequest(f"{name}-{i}", p, greedy(new_tokens)) for i, p in enumerate(prompts)]
    return decode_run(list(run_to_completion(eng, requests).values()))


def decode_run(done: list[Completion]) -> DecodeRun:
    """Tokens after each sequence's first, over the time from the first first-token to the last finish."""
    start = min(c.timings.first_token_s or 0.0 for c in done)
    end = max(c.timings.finished_s for c in done)
    return DecodeRun(sum(len(c.token_ids) - 1 for c in done), end - start)
