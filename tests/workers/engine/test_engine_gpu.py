"""On CUDA: the engine with the tiny model on the GPU (reference and Triton kernels), its CPU tier in
pinned host memory, gives ``transformers``' greedy tokens cold, batched and from a prefix swapped back
in from the CPU tier. Skipped without CUDA."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch

from kvgate.kernels import get_kernels
from kvgate.proto.ids import Epoch
from kvgate.workers.engine import EngineConfig, LLMEngine, run_to_completion
from kvgate.workers.kv import StepEventPublisher
from kvgate.workers.model import load_model
from tests.workers.engine.conftest import TinyPair
from tests.workers.engine.helpers import TINY_CACHE, WORKER, assert_no_leak, greedy, random_ids, request
from tests.workers.engine.test_tiny_parity import A, B, N

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]
Greedy = Callable[[list[int], int], list[int]]


def _cuda_engine(tiny: TinyPair, backend: str, gpu_blocks: int, cpu_blocks: int = 0) -> LLMEngine:
    if backend == "triton":
        pytest.importorskip("triton")
    kernels = get_kernels(backend)
    model = load_model(tiny.folder, kernels, device="cuda")
    config = EngineConfig(TINY_CACHE, num_gpu_blocks=gpu_blocks, num_cpu_blocks=cpu_blocks, device="cuda",
                          kernel_backend=backend)  # fmt: skip
    return LLMEngine(config, model, kernels, StepEventPublisher(WORKER, Epoch(1)))


@pytest.mark.parametrize("backend", ["reference", "triton"])
def test_cold_and_batched_on_cuda(tiny: TinyPair, tiny_greedy: Greedy, backend: str) -> None:
    prompts = [random_ids(n, seed=10 + n) for n in (5, 17, 30, 11)]
    engine = _cuda_engine(tiny, backend, gpu_blocks=64)
    done = run_to_completion(engine, [request(f"r{i}", p) for i, p in enumerate(prompts)])
    for i, prompt in enumerate(prompts):
        assert list(done[f"r{i}"].token_ids) == tiny_greedy(prompt, N)
    assert_no_leak(engine)


@pytest.mark.parametrize("backend", ["reference", "triton"])
def test_prefix_swapped_in_from_the_pinned_cpu_tier(
    tiny: TinyPair, tiny_greedy: Greedy, backend: str
) -> None:
    engine = _cuda_engine(tiny, backend, gpu_blocks=16, cpu_blocks=32)
    assert engine.runner.cpu[0].k.is_pinned()
    run_to_completion(engine, [request("a", A, greedy(1))])
    run_to_completion(engine, [request("filler", random_ids(63, seed=103), greedy(1))])
    done = run_to_completion(engine, [request("b", B)])["b"]
    assert (done.usage.cached_gpu_tokens, done.usage.cached_cpu_tokens) == (0, 24)
    assert list(done.token_ids) == tiny_greedy(B, N)
    assert_no_leak(engine)
