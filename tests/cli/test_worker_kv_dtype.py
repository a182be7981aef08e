"""``--kv-dtype`` and ``--kv-memory`` / ``--cpu-kv-memory``: how workers store K and V and how many bytes
their tiers take. The KV dtype reaches the engine through the cache layout (so the gateway of ``kvgate up``
checks the same fingerprint), sizes in bytes replace the block counts, a quantised KV dtype on a GPU runs
the SDPA kernels (their Triton path is checked only in Triton's interpreter), and bad values are refused
with the reason."""

from __future__ import annotations

import pytest

from kvgate.cli.cluster_args import settings_from
from kvgate.cli.main import build_parser
from kvgate.cluster.settings import ClusterSettings
from kvgate.cluster.worker_specs import engine_config


def _settings(command: str, *flags: str) -> ClusterSettings:
    args = build_parser().parse_args([command, *flags])
    return settings_from(args, local=True)


@pytest.mark.parametrize(("flags", "gpu", "name", "storage", "kernels"), [
    ((), False, "fp32", "float32", "sdpa"),
    ((), True, "bf16", "bfloat16", "triton"),
    (("--kv-dtype", "int8"), False, "int8", "int8", "sdpa"),
    (("--kv-dtype", "fp8"), True, "fp8", "float8_e4m3fn", "sdpa"),
    (("--kv-dtype", "bf16", "--dtype", "bfloat16"), False, "bf16", "bfloat16", "sdpa"),
])  # fmt: skip
def test_the_kv_dtype_reaches_the_engine_and_the_layout(
    flags: tuple[str, ...], gpu: bool, name: str, storage: str, kernels: str
) -> None:
    settings = _settings("up", *flags)
    config = engine_config(settings, gpu)
    assert (config.kv_dtype.name, config.kv_dtype.storage, config.kernel_backend) == (name, storage, kernels)
    assert config.cache == settings.cache  # the gateway of `up` is built from the same layout
    assert config.cache.kv_dtype == (flags[1] if flags else "auto")


def test_the_kv_dtype_changes_the_fingerprint_workers_and_gateways_advertise() -> None:
    plain, int8 = (_settings("up", *flags).cache for flags in ((), ("--kv-dtype", "int8")))
    assert plain.fingerprint() != int8.fingerprint()
    args = build_parser().parse_args(["gateway", "--kv-dtype", "int8", "--redis-url", "redis://x"])
    assert args.kv_dtype == "int8"


@pytest.mark.parametrize("command", ["up", "workers"])
@pytest.mark.parametrize("gpu", [False, True])
def test_sizes_in_bytes_reach_the_engine(command: str, gpu: bool) -> None:
    extra = ["--redis-url", "redis://x"] if command == "workers" else []
    flags = ["--kv-dtype", "int8", "--kv-memory", "2GiB", "--cpu-kv-memory", "512MB", *extra]
    config = engine_config(_settings(command, *flags), gpu)
    assert (config.kv_memory_bytes, config.cpu_kv_memory_bytes) == (2 * 2**30, 512 * 10**6)
    assert config.num_gpu_blocks is None
    assert config.gpu_memory_fraction is None
    assert config.num_cpu_blocks == 0


def test_without_sizes_in_bytes_the_block_counts_stay() -> None:
    config = engine_config(_settings("up", "--num-gpu-blocks", "64", "--num-cpu-blocks", "8"), False)
    assert (config.num_gpu_blocks, config.num_cpu_blocks, config.kv_memory_bytes) == (64, 8, None)


@pytest.mark.parametrize(("flags", "error"), [
    (("--kv-dtype", "int4"), "--kv-dtype: invalid choice: 'int4'"),
    (("--kv-memory", "2 gigs"), "--kv-memory: not a size: '2 gigs'"),
    (("--kv-memory", "0"), "--kv-memory: a memory size must be positive"),
    (("--cpu-kv-memory", "lots"), "--cpu-kv-memory: not a size: 'lots'"),
])  # fmt: skip
def test_bad_values_are_refused_with_the_reason(
    flags: tuple[str, ...], error: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit):
        build_parser().parse_args(["up", *flags])
    assert error in capsys.readouterr().err


def test_a_float_kv_dtype_other_than_the_compute_dtype_is_refused() -> None:
    settings = _settings("up", "--kv-dtype", "bf16", "--dtype", "float32")
    with pytest.raises(ValueError, match="a float KV dtype must be the compute dtype"):
        engine_config(settings, False)


def test_block_counts_and_bytes_of_the_cpu_tier_together_are_refused() -> None:
    with pytest.raises(ValueError, match="--num-cpu-blocks or --cpu-kv-memory"):
        _settings("up", "--num-cpu-blocks", "8", "--cpu-kv-memory", "1GiB")
