"""The engine with quantised KV pools (``kv_dtype`` int8 and fp8): SmolLM2-135M's greedy tokens agree with
the fp32 cache's for their first tokens; a prefix-cache hit gives the tokens the same quantised engine
gives without the hit (the first ``AGREE`` of them: a prefix computed in another batch shape may round a
few elements to the neighbouring int8 / fp8 value, which can flip a near-tie later on); a hit from the
CPU tier (offloaded with its scales, swapped back) gives exactly the tokens of the same hit from the GPU
tier; and the tiers are sized from bytes at the KV dtype's bytes per block, scales included."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import pytest

from kvgate.common.models import DEFAULT_MODEL_ID
from kvgate.common.tokenizer import Tokenizer
from kvgate.kernels import get_kernels
from kvgate.proto.ids import Epoch
from kvgate.proto.kv_dtype import KV_DTYPES
from kvgate.proto.layout import CacheLayout, KVGeometry
from kvgate.workers.engine import EngineConfig, LLMEngine, run_to_completion
from kvgate.workers.engine.kv_pools import tier_sizes
from kvgate.workers.kv import StepEventPublisher
from kvgate.workers.model import DecoderModel
from tests.workers.engine.conftest import TinyPair
from tests.workers.engine.helpers import TINY_CACHE, WORKER, assert_no_leak, engine_for, greedy, request
from tests.workers.model.test_smollm2_parity import SYSTEM

CACHE = CacheLayout(DEFAULT_MODEL_ID, secret=b"test")  # blocks of 16 tokens
QUANTISED = ["int8", "fp8"]
AGREE = 8  # greedy tokens that must equal the fp32 cache's (the measured agreement: docs/ENGINE.md)
Chat = Callable[..., list[int]]


def _engine(model: DecoderModel, tokenizer: Tokenizer, kv_dtype: str, gpu: int, cpu: int = 0) -> LLMEngine:
    cache = dataclasses.replace(CACHE, kv_dtype=kv_dtype)
    return engine_for(model, gpu_blocks=gpu, cpu_blocks=cpu, cache=cache, tokenizer=tokenizer)


def _generate(engine: LLMEngine, request_id: str, prompt: list[int], n: int = 16):
    return run_to_completion(engine, [request(request_id, prompt, greedy(n))])[request_id]


@pytest.mark.slow
@pytest.mark.parametrize("kv_dtype", QUANTISED)
def test_greedy_tokens_agree_with_the_fp32_cache(
    smollm2: DecoderModel, tokenizer: Tokenizer, chat_prompt: Chat, kv_dtype: str
) -> None:
    prompt = chat_prompt("What is the capital of France?")
    exact = _generate(_engine(smollm2, tokenizer, "fp32", gpu=16), "r", prompt)
    engine = _engine(smollm2, tokenizer, kv_dtype, gpu=16)
    quantised = _generate(engine, "r", prompt)
    assert list(quantised.token_ids)[:AGREE] == list(exact.token_ids)[:AGREE]
    pool = engine.runner.gpu[0]
    assert pool.k.element_size() == 1
    assert pool.k_scale is not None
    assert pool.k_scale.any()
    assert_no_leak(engine)


@pytest.mark.slow
@pytest.mark.parametrize("kv_dtype", QUANTISED)
def test_a_prefix_hit_gives_the_tokens_of_a_cold_run(
    smollm2: DecoderModel, tokenizer: Tokenizer, chat_prompt: Chat, kv_dtype: str
) -> None:
    first, second = chat_prompt("Which city is in Japan?", SYSTEM), chat_prompt("How much is Quito?", SYSTEM)
    cold = _generate(_engine(smollm2, tokenizer, kv_dtype, gpu=32), "b", second)
    engine = _engine(smollm2, tokenizer, kv_dtype, gpu=32)
    _generate(engine, "a", first)
    warm = _generate(engine, "b", second)
    assert warm.usage.cached_gpu_tokens >= 48
    assert list(warm.token_ids)[:AGREE] == list(cold.token_ids)[:AGREE]
    assert_no_leak(engine)


@pytest.mark.slow
@pytest.mark.parametrize("kv_dtype", QUANTISED)
def test_a_prefix_offloaded_to_the_cpu_tier_keeps_its_scales(
    smollm2: DecoderModel, tokenizer: Tokenizer, chat_prompt: Chat, kv_dtype: str
) -> None:
    first, second = chat_prompt("Which city is in Japan?", SYSTEM), chat_prompt("How much is Lisbon?", SYSTEM)
    on_gpu = _engine(smollm2, tokenizer, kv_dtype, gpu=32)
    _generate(on_gpu, "a", first, n=1)
    gpu_hit = _generate(on_gpu, "b", second)
    engine = _engine(smollm2, tokenizer, kv_dtype, gpu=16, cpu=32)  # 256 GPU slots
    _generate(engine, "a", first, n=1)
    filler = tokenizer.encode("The quick brown fox jumps over the lazy dog. " * 40)[:255].tolist()
    _generate(engine, "filler", filler, n=1)  # needs every GPU block: the first prompt's go to the CPU
    assert engine.kv_counters().offloaded == len(first) // 16
    assert engine.runner.cpu[0].k_scale is not None
    assert engine.runner.cpu[0].k_scale.any()
    warm = _generate(engine, "b", second)
    assert warm.usage.cached_cpu_tokens == gpu_hit.usage.cached_gpu_tokens >= 48
    assert list(warm.token_ids) == list(gpu_hit.token_ids)  # the same bytes and scales came back
    assert_no_leak(engine)


def _tiny_config(name: str, **settings: Any) -> EngineConfig:
    """An engine config of the tiny cache layout with KV dtype ``name``; the weights in that float type,
    float32 for a quantised one (unless ``settings`` say otherwise)."""
    dtype = "float32" if KV_DTYPES[name].scaled else KV_DTYPES[name].storage
    return EngineConfig(dataclasses.replace(TINY_CACHE, kv_dtype=name), **({"dtype": dtype} | settings))


@pytest.mark.parametrize(
    ("kv_dtype", "ratio"), [("fp32", 1), ("bf16", 2), ("fp16", 2), ("int8", 4), ("fp8", 4)]
)
def test_tiers_sized_in_bytes_hold_more_tokens_in_smaller_types(
    tiny: TinyPair, kv_dtype: str, ratio: int
) -> None:
    """Tokens per byte: 2x bf16 and 4x fp32 for int8 / fp8, less the scales (4 B per block, layer, K/V
    and KV head: with the tiny model's head dim 16 and 4-token blocks, 4 / 64 = 1/16 of an int8 block;
    0.2 % with SmolLM2's head dim 64 and 16-token blocks)."""
    budget = 2**20
    kv = _geometry(tiny)
    config = _tiny_config(kv_dtype, kv_memory_bytes=budget, cpu_kv_memory_bytes=budget // 2)
    capacity = tier_sizes(config, kv)
    fp32 = tier_sizes(_tiny_config("fp32", kv_memory_bytes=budget), kv)
    per_token = 2 * kv.num_layers * kv.num_kv_heads * kv.head_dim * 4 // ratio  # elements only
    scales = 2 * kv.num_layers * kv.num_kv_heads * 4 if ratio == 4 else 0
    assert capacity.bytes_per_block == per_token * 4 + scales
    assert capacity.gpu_blocks == budget // capacity.bytes_per_block
    assert capacity.cpu_blocks == budget // 2 // capacity.bytes_per_block
    if ratio < 4:
        assert capacity.gpu_tokens == fp32.gpu_tokens * ratio
    else:
        assert capacity.gpu_tokens == pytest.approx(fp32.gpu_tokens * 4 * 16 / 17, abs=4)
    assert f"KV {kv_dtype}:" in capacity.describe()


def _geometry(tiny: TinyPair) -> KVGeometry:
    return tiny.ours.config.kv_geometry("float32")


def test_an_engine_sized_in_bytes_allocates_what_it_reports(tiny: TinyPair) -> None:
    config = _tiny_config("int8", kv_memory_bytes=100_000, cpu_kv_memory_bytes=50_000)
    engine = LLMEngine(config, tiny.ours, get_kernels("sdpa"), StepEventPublisher(WORKER, Epoch(1)))
    capacity = engine.capacity
    assert engine.kv.gpu_pool.num_blocks == capacity.gpu_blocks == 100_000 // capacity.bytes_per_block
    assert engine.kv.cpu_pool.num_blocks == capacity.cpu_blocks == 50_000 // capacity.bytes_per_block
    held = sum(t.nbytes for layer in engine.runner.gpu for t in layer if t is not None)
    assert held == capacity.gpu_blocks * capacity.bytes_per_block <= 100_000


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"num_gpu_blocks": 8, "kv_memory_bytes": 2**20}, "exactly one of"),
        ({"kv_memory_bytes": 0}, "kv_memory_bytes must be >= 1"),
        ({"num_gpu_blocks": 8, "num_cpu_blocks": 4, "cpu_kv_memory_bytes": 2**20}, "not set together"),
    ],
)
def test_bad_sizes_and_backends_are_refused(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        _tiny_config("int8", **kwargs)


def test_a_float_kv_dtype_must_be_the_compute_dtype() -> None:
    assert _tiny_config("bf16", num_gpu_blocks=8, dtype="bfloat16").kv_dtype.storage == "bfloat16"
    with pytest.raises(ValueError, match="must be the compute dtype"):
        _tiny_config("bf16", num_gpu_blocks=8, dtype="float32")


def test_a_budget_too_small_for_one_block_is_refused(tiny: TinyPair) -> None:
    kv = _geometry(tiny)
    with pytest.raises(ValueError, match="holds no KV block"):
        tier_sizes(_tiny_config("fp8", kv_memory_bytes=10), kv)
