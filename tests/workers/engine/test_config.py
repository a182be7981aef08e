"""``EngineConfig`` validation, and what the engine checks when it starts."""

from __future__ import annotations

import pytest
import torch

from kvgate.kernels import get_kernels
from kvgate.proto.ids import Epoch
from kvgate.workers.engine import EngineConfig, LLMEngine, SchedulingLimits
from kvgate.workers.kv import StepEventPublisher
from tests.workers.engine.conftest import TinyPair
from tests.workers.engine.helpers import TINY_CACHE, WORKER, engine_for


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({}, "exactly one of num_gpu_blocks, kv_memory_bytes and gpu_memory_fraction"),
        ({"num_gpu_blocks": 8, "gpu_memory_fraction": 0.5}, "exactly one"),
        ({"num_gpu_blocks": 0}, "num_gpu_blocks must be >= 1"),
        ({"gpu_memory_fraction": 1.5}, "gpu_memory_fraction must lie in"),
        ({"num_gpu_blocks": 8, "num_cpu_blocks": -1}, "num_cpu_blocks"),
        ({"num_gpu_blocks": 8, "max_model_len": 1}, "max_model_len"),
        ({"num_gpu_blocks": 8, "ttl_s": -1}, "ttl_s"),
        ({"num_gpu_blocks": 8, "kernel_backend": "cuda-magic"}, "unknown kernel backend"),
        ({"num_gpu_blocks": 8, "dtype": "int8"}, "dtype"),
        ({"num_gpu_blocks": 8, "device": "tpu:x"}, "invalid device"),
        ({"num_gpu_blocks": 8, "gemm": "fastest"}, "gemm must be one of auto, linear"),
    ],
)
def test_invalid_settings_are_refused(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        EngineConfig(TINY_CACHE, **kwargs)


def test_scheduling_limits_must_be_positive() -> None:
    with pytest.raises(ValueError, match="max_prefill_tokens_per_step must be >= 1"):
        SchedulingLimits(max_prefill_tokens_per_step=0)


def test_the_context_is_capped_by_the_gpu_tier_and_by_the_model(tiny: TinyPair) -> None:
    assert engine_for(tiny.ours, gpu_blocks=10).max_model_len == 40  # 10 blocks of 4 tokens
    assert engine_for(tiny.ours, gpu_blocks=1000).max_model_len == 512  # the model's context
    with pytest.raises(ValueError, match="max_model_len 41 > 40"):
        engine_for(tiny.ours, gpu_blocks=10, max_model_len=41)


def test_a_fraction_of_free_memory_sizes_the_gpu_tier(tiny: TinyPair) -> None:
    config = EngineConfig(TINY_CACHE, gpu_memory_fraction=1e-5)
    engine = LLMEngine(config, tiny.ours, get_kernels("reference"), StepEventPublisher(WORKER, Epoch(1)))
    assert engine.kv.gpu_pool.num_blocks >= 1


def test_a_model_in_another_dtype_is_refused(tiny: TinyPair) -> None:
    config = EngineConfig(TINY_CACHE, num_gpu_blocks=8, dtype="bfloat16")
    with pytest.raises(ValueError, match=r"dtype is torch.float32"):
        LLMEngine(config, tiny.ours, get_kernels("reference"), StepEventPublisher(WORKER, Epoch(1)))
    assert tiny.ours.embed.weight.dtype == torch.float32
