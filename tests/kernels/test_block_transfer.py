"""The torch block-transfer helpers shared by both backends (the CUDA <-> CPU paths: test_kernels_gpu)."""

from __future__ import annotations

import pytest
import torch

from kvgate.kernels.block_transfer import copy_blocks_torch


def test_copy_rejects_pools_of_different_block_shape() -> None:
    src = torch.zeros(4, 16, 2, 8)
    dst = torch.zeros(4, 16, 2, 16)
    with pytest.raises(ValueError, match="cannot copy blocks"):
        copy_blocks_torch(src, src, dst, dst, torch.tensor([0]), torch.tensor([1]))


def test_copy_rejects_mismatched_id_lists() -> None:
    pool = torch.zeros(4, 16, 2, 8)
    with pytest.raises(ValueError, match="equal length"):
        copy_blocks_torch(pool, pool, pool.clone(), pool.clone(), torch.tensor([0, 1]), torch.tensor([1]))
