"""Launch heuristics of the Triton backend (pure host-side arithmetic)."""

from __future__ import annotations

from types import ModuleType

import pytest
import torch


def test_tiles_must_be_powers_of_two(triton_backend: ModuleType) -> None:
    from kvgate.kernels.triton_ops.config import TritonConfig

    with pytest.raises(ValueError, match="decode_block_n=24"):
        TritonConfig(decode_block_n=24)
    with pytest.raises(ValueError, match="power of two >= 16"):
        TritonConfig(prefill_block_m=8)


@pytest.mark.parametrize(
    ("batch", "kv_heads", "max_tokens", "expected"),
    [
        (1, 8, 16384, 32),  # one long sequence: as many splits as allowed
        (1, 8, 1024, 2),  # short context: at most one split per 512 tokens
        (64, 8, 16384, 2),  # 512 programs already: 1024 wanted
        (256, 8, 4096, 1),  # the batch fills the device
    ],
)
def test_decode_splits_fill_the_device_without_tiny_splits(
    triton_backend: ModuleType, batch: int, kv_heads: int, max_tokens: int, expected: int
) -> None:
    from kvgate.kernels.triton_ops.config import TritonConfig

    config = TritonConfig(decode_target_programs=1024)
    assert config.decode_splits(batch, kv_heads, max_tokens, torch.device("cpu")) == expected


def test_cpu_default_is_one_split(triton_backend: ModuleType) -> None:
    from kvgate.kernels.triton_ops.config import TritonConfig

    assert TritonConfig().decode_splits(1, 1, 1 << 20, torch.device("cpu")) == 1
