"""``kvgate plan``'s memory arithmetic against figures worked out by hand or read from the files.

Every expected number here is computed in the test from architecture numbers (the published Llama-3-8B
config, the SmolLM2 GGUF's own metadata read with the ``gguf`` package, ``transformers``' own models),
never from the planner's code.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import gguf
import pytest
import torch

from kvgate.cli.main import main
from kvgate.cli.plan_cmd import parse_bytes
from kvgate.common.models import default_model_path
from kvgate.plan.memory import MemoryInputs, plan_memory
from kvgate.plan.model_source import resolve_model
from kvgate.plan.params import parameter_count
from kvgate.proto.kv_dtype import KV_DTYPES, kv_block_bytes, kv_dtype
from kvgate.proto.layout import DEFAULT_BLOCK_SIZE, KVGeometry
from kvgate.workers.model import kv_cache_bytes_per_block, model_config
from tests.workers.model.tiny import COMMON, VARIANTS

LLAMA3_8B = Path(__file__).parent / "data" / "llama-3-8b-config.json"
GIB = 2**30


def plan_json(capsys: pytest.CaptureFixture, *args: str) -> dict:
    assert main(["plan", *args, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_llama3_8b_in_fp16_is_128_kib_per_token(capsys: pytest.CaptureFixture) -> None:
    out = plan_json(capsys, str(LLAMA3_8B), "--kv-dtype", "fp16")
    assert out["kv_bytes_per_token"] == 32 * 8 * 128 * 2 * 2 == 131_072
    # The published parameter count of Meta-Llama-3-8B.
    assert out["parameters"] == 8_030_261_248


def test_llama3_8b_on_80_gib_budget_arithmetic(capsys: pytest.CaptureFixture) -> None:
    out = plan_json(capsys, str(LLAMA3_8B), "--gpu-memory", "80GiB", "--memory-utilization", "0.9")
    weights = 8_030_261_248 * 2  # bf16
    blocks = (int(80 * GIB * 0.9) - weights) // (16 * 131_072)
    assert out["weight_bytes_per_gpu"] == weights
    assert out["blocks_per_worker"] == blocks == 29_205
    assert out["tokens_per_worker"] == blocks * 16


def test_int8_and_fp8_halve_the_elements_and_add_one_fp32_scale_per_block_and_head(
    capsys: pytest.CaptureFixture,
) -> None:
    scales_per_token = 2 * 32 * 8 * 4 / 16  # K and V, every layer and KV head, float32, per 16 tokens
    for name in ("int8", "fp8"):
        out = plan_json(capsys, str(LLAMA3_8B), "--kv-dtype", name)
        assert out["kv_bytes_per_token"] == 65_536 + scales_per_token == 65_664
    bf16 = plan_json(capsys, str(LLAMA3_8B))["tokens_per_worker"]
    int8 = plan_json(capsys, str(LLAMA3_8B), "--kv-dtype", "int8")["tokens_per_worker"]
    assert 1.99 * bf16 < int8 < 2 * bf16  # twice the tokens, less the scales' 0.2 %


def test_smollm2_from_its_gguf(capsys: pytest.CaptureFixture) -> None:
    reader = gguf.GGUFReader(default_model_path())

    def meta(key: str) -> int:
        field = reader.fields[f"llama.{key}"]
        return int(field.parts[field.data[0]][0])

    layers, kv_heads = meta("block_count"), meta("attention.head_count_kv")
    head_dim = meta("embedding_length") // meta("attention.head_count")
    out = plan_json(capsys, "default", "--kv-dtype", "bf16")
    assert (layers, kv_heads, head_dim) == (30, 3, 64)
    assert out["kv_bytes_per_token"] == 2 * layers * kv_heads * head_dim * 2 == 23_040
    assert out["parameters"] == sum(int(t.n_elements) for t in reader.tensors)  # tied output head
    assert plan_json(capsys, str(default_model_path()), "--kv-dtype", "fp32")["kv_bytes_per_token"] == 46_080


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_parameter_count_equals_transformers_models(variant: str) -> None:
    import transformers

    class_name, overrides = VARIANTS[variant]
    hf_config = getattr(transformers, class_name)(**{**COMMON, **overrides})
    with torch.device("meta"):
        model = transformers.AutoModelForCausalLM.from_config(hf_config)
    expected = sum(p.numel() for p in model.parameters())  # a tied head is counted once
    assert parameter_count(model_config(hf_config.to_dict())) == expected


@pytest.mark.parametrize("name", ["fp32", "bf16", "fp16"])
def test_float_blocks_match_the_engines_pool_sizing(name: str) -> None:
    dtype = KV_DTYPES[name]
    geometry = KVGeometry(30, 3, 64, dtype.storage)
    assert kv_block_bytes(geometry, dtype, DEFAULT_BLOCK_SIZE) == kv_cache_bytes_per_block(
        geometry, DEFAULT_BLOCK_SIZE
    )
    assert kv_dtype(dtype.storage) is dtype


def test_tensor_parallel_splits_kv_heads_and_weights() -> None:
    config = resolve_model(str(LLAMA3_8B)).config
    one = plan_memory(config, MemoryInputs(80 * GIB, KV_DTYPES["bf16"]))
    two = plan_memory(config, MemoryInputs(80 * GIB, KV_DTYPES["bf16"], tp=2))
    assert two.kv_heads_per_gpu == 4
    assert two.block_bytes_per_gpu * 2 == one.block_bytes_per_gpu
    assert two.weight_bytes_per_gpu * 2 == one.weight_bytes_per_gpu
    assert two.kv_bytes_per_token == one.kv_bytes_per_token == 131_072
    sixteen = plan_memory(config, MemoryInputs(80 * GIB, KV_DTYPES["bf16"], tp=16))
    assert sixteen.kv_heads_per_gpu == 1  # 8 heads on 16 ranks: each holds one, replicated
    with pytest.raises(ValueError, match="cannot split 8 KV heads"):
        plan_memory(config, MemoryInputs(80 * GIB, KV_DTYPES["bf16"], tp=3))


def test_cpu_tier_and_prefix_copies(capsys: pytest.CaptureFixture) -> None:
    out = plan_json(capsys, str(LLAMA3_8B), "--cpu-memory", "64GiB", "--prefix-tokens", "1000", "--tp", "2")
    assert out["cpu_blocks_per_worker"] == 64 * GIB // (16 * 131_072) == 32_768  # whole worker: both ranks
    assert out["cpu_tokens_per_worker"] == 32_768 * 16
    assert out["prefix_copies_cpu"] == 32_768 // 63  # 1000 tokens take 63 blocks of 16
    assert out["prefix_copies_gpu"] == out["blocks_per_worker"] // 63


def test_weights_that_do_not_fit_are_an_error(capsys: pytest.CaptureFixture) -> None:
    assert main(["plan", str(LLAMA3_8B), "--gpu-memory", "16GiB"]) == 2
    assert "no room for one KV block" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("text", "size"), [("80GiB", 80 * GIB), ("24GB", 24 * 10**9), ("512M", 512 * 2**20), ("1024", 1024)]
)
def test_sizes(text: str, size: int) -> None:
    assert parse_bytes(text) == size


def test_a_size_without_a_known_unit_is_refused() -> None:
    with pytest.raises(ValueError, match="not a size"):
        parse_bytes("80 gigs")


def test_the_command_line_starts_without_torch() -> None:
    """``kvgate plan`` registers with every other subcommand: importing it must not pull in torch (the
    workers' model package); the model's config is read, lazily, only when a plan is made."""
    code = "import sys, kvgate.cli.main; print(sorted({'torch', 'kvgate.workers.model'} & set(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
