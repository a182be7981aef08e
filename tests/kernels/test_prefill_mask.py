"""Prefill masks (``kvgate.kernels.prefill_mask``): the additive mask lets each new token see its
prefix and itself (its last ``window`` with a window), and a step's layers share one mask per sequence
shape while a new step, or the same step's tensors changed in place, gets its own."""

from __future__ import annotations

import pytest
import torch

from kvgate.kernels import ReferenceKernels, SdpaKernels
from kvgate.kernels.prefill_mask import PrefillMasks, additive_mask
from kvgate.kernels.testing import random_paged_batch

CPU = torch.device("cpu")


@pytest.mark.parametrize("window", [None, 1, 4, 100])
@pytest.mark.parametrize(("num_q", "context_len"), [(3, 10), (10, 10), (1, 7)])
def test_each_new_token_sees_its_prefix_and_itself(num_q: int, context_len: int, window: int | None) -> None:
    mask = additive_mask(num_q, context_len, window, torch.bfloat16, CPU)
    assert mask.shape == (num_q, context_len)
    assert mask.dtype == torch.bfloat16
    for r in range(num_q):
        position = context_len - num_q + r
        first = 0 if window is None else max(0, position - window + 1)
        seen = [j for j in range(context_len) if mask[r, j] == 0]
        assert seen == list(range(first, position + 1))
        assert all(mask[r, j] == float("-inf") for j in range(context_len) if j not in seen)


def test_the_layers_of_a_step_share_its_masks_and_a_new_step_gets_its_own() -> None:
    masks = PrefillMasks()
    cu, lens = torch.tensor([0, 3, 5]), torch.tensor([10, 2])
    first = masks.mask((cu, lens), 3, 10, None, torch.float32, CPU)
    assert masks.mask((cu, lens), 3, 10, None, torch.float32, CPU) is first  # the next layer
    assert not torch.equal(masks.mask((cu, lens), 3, 10, 4, torch.float32, CPU), first)  # a window
    lens[0] = 12  # the same tensors changed in place: a new mask
    assert masks.mask((cu, lens), 3, 12, None, torch.float32, CPU).shape == (3, 12)
    again = masks.mask((cu.clone(), lens), 3, 12, None, torch.float32, CPU)  # another step's tensors
    assert again is not masks.mask((cu, lens), 3, 12, None, torch.float32, CPU)


def test_a_step_over_cached_prefixes_attends_as_the_reference_in_every_layer() -> None:
    kernels, reference = SdpaKernels(), ReferenceKernels()
    batch = random_paged_batch([40, 19, 70], [9, 19, 30], num_heads=4, num_kv_heads=2, head_dim=32, seed=5)
    args = (batch.q, batch.k_cache, batch.v_cache, batch.block_tables, batch.cu_seqlens_q, batch.context_lens)
    for window in (None, None, 8, None):  # four layers of one step, one of them windowed
        expected = reference.prefill_attention(*args, 0.2, window=window)
        torch.testing.assert_close(kernels.prefill_attention(*args, 0.2, window=window), expected)


def test_a_mask_too_large_to_keep_is_built_for_each_call(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("kvgate.kernels.prefill_mask.MAX_KEPT_ELEMENTS", 20)
    masks, step = PrefillMasks(), (torch.tensor([0, 3]), torch.tensor([10]))
    large = masks.mask(step, 3, 10, None, torch.float32, CPU)  # 30 elements
    assert masks.mask(step, 3, 10, None, torch.float32, CPU) is not large
    assert torch.equal(masks.mask(step, 3, 10, None, torch.float32, CPU), large)
    small = masks.mask(step, 2, 10, None, torch.float32, CPU)  # 20 elements: kept
    assert masks.mask(step, 2, 10, None, torch.float32, CPU) is small
