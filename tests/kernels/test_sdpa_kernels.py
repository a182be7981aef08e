"""The SDPA backend (the engine's fast path off the GPU) against the reference on scattered paged batches
whose unowned slots hold NaN: prefill with and without cached prefixes, decode over ragged contexts,
windows, soft-capping, GQA groupings, fp32 / fp16 / bf16, and the KV write."""

from __future__ import annotations

import pytest
import torch

from kvgate.kernels import ReferenceKernels, SdpaKernels, get_kernels
from kvgate.kernels.decode_plan import build_plan
from kvgate.kernels.testing import PagedBatch, random_paged_batch

REF, FAST = ReferenceKernels(), SdpaKernels()
HEADS = [(4, 4, 32), (4, 1, 64), (9, 3, 64), (8, 2, 80)]  # (num_heads, num_kv_heads, head_dim)
TOLERANCE = {torch.float32: 2e-5, torch.float16: 2e-3, torch.bfloat16: 2e-2}
ONE_STEP_AND_ALONE = [  # (contexts, queries): a mixed step, then steps of one sequence
    ([37, 50, 150, 100, 33, 16], [37, 13, 70, 1, 0, 16]),
    ([150], [150]),
    ([150], [70]),
]


def _batch(
    contexts: list[int], queries: list[int], heads: tuple[int, int, int], dtype: torch.dtype
) -> PagedBatch:
    num_heads, num_kv_heads, head_dim = heads
    return random_paged_batch(
        contexts, queries, num_heads=num_heads, num_kv_heads=num_kv_heads, head_dim=head_dim,
        dtype=dtype, seed=sum(contexts) + num_heads,
    )  # fmt: skip


def _close(actual: torch.Tensor, expected: torch.Tensor, dtype: torch.dtype) -> None:
    assert actual.dtype == expected.dtype == dtype
    assert not actual.isnan().any()
    torch.testing.assert_close(actual.float(), expected.float(), atol=TOLERANCE[dtype], rtol=0)


def _prefill_args(batch: PagedBatch, scale: float) -> tuple:
    return (batch.q, batch.k_cache, batch.v_cache, batch.block_tables, batch.cu_seqlens_q, batch.context_lens,
            scale)  # fmt: skip


def _decode_args(batch: PagedBatch, scale: float) -> tuple:
    return batch.q, batch.k_cache, batch.v_cache, batch.block_tables, batch.context_lens, scale


def test_the_registry_serves_it() -> None:
    assert get_kernels("sdpa").name == "sdpa"


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("heads", HEADS, ids=str)
def test_prefill_matches_the_reference(heads: tuple[int, int, int], dtype: torch.dtype) -> None:
    # whole prompts (the causal fast form), unaligned cached prefixes, one query after a long prefix, a
    # sequence with no new token, one exactly one block long; then a step of one sequence (a whole
    # prompt, a suffix after its cached prefix)
    for contexts, queries in ONE_STEP_AND_ALONE:
        args = _prefill_args(_batch(contexts, queries, heads, dtype), 0.11)
        _close(FAST.prefill_attention(*args), REF.prefill_attention(*args), dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("heads", HEADS, ids=str)
@pytest.mark.parametrize(
    "contexts", [[1, 15, 16, 17, 90, 200], [64] * 4, [33]], ids=["ragged", "even", "one"]
)
def test_decode_matches_the_reference(
    heads: tuple[int, int, int], dtype: torch.dtype, contexts: list[int]
) -> None:
    batch = _batch(contexts, [1] * len(contexts), heads, dtype)
    args = _decode_args(batch, 0.09)
    _close(FAST.decode_attention(*args), REF.decode_attention(*args), dtype)


@pytest.mark.parametrize(("window", "softcap"), [(5, None), (16, None), (1, None), (None, 2.0), (40, 3.0)])
def test_window_and_softcap_match_the_reference(window: int | None, softcap: float | None) -> None:
    options = {"window": window, "softcap": softcap}
    for contexts, queries in [([37, 50, 150, 33], [37, 13, 70, 0]), *ONE_STEP_AND_ALONE[1:]]:
        args = _prefill_args(_batch(contexts, queries, (8, 2, 64), torch.float32), 0.11)
        expected = REF.prefill_attention(*args, **options)
        _close(FAST.prefill_attention(*args, **options), expected, torch.float32)
    batch = _batch([1, 15, 17, 90, 200], [1] * 5, (8, 2, 64), torch.float32)
    args = _decode_args(batch, 0.09)
    _close(FAST.decode_attention(*args, **options), REF.decode_attention(*args, **options), torch.float32)


def test_decode_equals_a_one_token_prefill() -> None:
    batch = _batch([3, 40, 77], [1, 1, 1], (9, 3, 64), torch.float32)
    decoded = FAST.decode_attention(*_decode_args(batch, 0.125))
    prefilled = FAST.prefill_attention(*_prefill_args(batch, 0.125))
    torch.testing.assert_close(decoded, prefilled, atol=1e-5, rtol=0)


def test_write_kv_matches_the_reference_and_skips_slot_minus_one() -> None:
    shape = (6, 4, 2, 8)  # 6 blocks of 4 tokens, 2 kv heads, head_dim 8
    k, v = torch.randn(5, 2, 8), torch.randn(5, 2, 8)
    slots = torch.tensor([3, 9, -1, 22, 0])
    caches = {name: (torch.zeros(shape), torch.zeros(shape)) for name in ("ref", "fast")}
    REF.write_kv(k, v, *caches["ref"], slots)
    FAST.write_kv(k, v, *caches["fast"], slots)
    assert torch.equal(caches["fast"][0], caches["ref"][0])
    assert torch.equal(caches["fast"][1], caches["ref"][1])
    assert torch.count_nonzero(caches["fast"][0].abs().sum(-1)) == 2 * 4  # 4 tokens stored, 2 heads each


def test_write_kv_casts_to_the_cache_dtype() -> None:
    cache = torch.zeros(2, 4, 1, 8, dtype=torch.bfloat16), torch.zeros(2, 4, 1, 8, dtype=torch.bfloat16)
    k = torch.randn(1, 1, 8)
    FAST.write_kv(k, k, *cache, torch.tensor([5]))
    assert torch.equal(cache[0][1, 1], k[0].to(torch.bfloat16))


def test_a_strided_pool_is_refused_with_a_clear_error() -> None:
    batch = _batch([20], [1], (4, 2, 32), torch.float32)
    strided = batch.k_cache.transpose(0, 1).contiguous().transpose(0, 1)  # same shape, other strides
    with pytest.raises(ValueError, match="contiguous KV pools"):
        FAST.decode_attention(batch.q, strided, strided, batch.block_tables, batch.context_lens, 0.1)


def test_the_layers_of_a_step_share_one_plan_and_a_new_step_gets_its_own() -> None:
    kernels = SdpaKernels()
    first = _batch([15, 40, 7], [1, 1, 1], (4, 2, 32), torch.float32)
    args = _decode_args(first, 0.2)
    for _ in range(3):  # three layers of one step
        _close(kernels.decode_attention(*args), REF.decode_attention(*args), torch.float32)
    plan = kernels._plans.plan(first.block_tables, first.context_lens, None, 16, 2)
    assert kernels._plans.plan(first.block_tables, first.context_lens, None, 16, 2) is plan
    assert kernels._plans.plan(first.block_tables, first.context_lens, 8, 16, 2) is not plan  # a window
    second = _batch([33, 2], [1, 1], (4, 2, 32), torch.float32)  # the next step: other tensors
    args = _decode_args(second, 0.2)
    _close(kernels.decode_attention(*args), REF.decode_attention(*args), torch.float32)
    second.context_lens[0] -= 5  # modified in place: the plan is rebuilt for the new lengths
    _close(kernels.decode_attention(*args), REF.decode_attention(*args), torch.float32)


def test_a_step_built_in_inference_mode_is_served() -> None:
    batch = _batch([15, 40], [1, 1], (4, 2, 32), torch.float32)
    with torch.inference_mode():
        tables, lens = batch.block_tables.clone(), batch.context_lens.clone()  # inference tensors
        args = (batch.q, batch.k_cache, batch.v_cache, tables, lens, 0.2)
        _close(SdpaKernels().decode_attention(*args), REF.decode_attention(*args), torch.float32)


def test_a_slot_mapping_changed_in_place_is_checked_again() -> None:
    kernels = SdpaKernels()  # remembers the last mapping found to store every token
    shape = (6, 4, 2, 8)
    k, v = torch.randn(3, 2, 8), torch.randn(3, 2, 8)
    slots = torch.tensor([3, 9, 22])
    kernels.write_kv(k, v, torch.zeros(shape), torch.zeros(shape), slots)
    slots[1] = -1  # the same tensor, now skipping a token
    k_cache, v_cache = torch.zeros(shape), torch.zeros(shape)
    kernels.write_kv(k, v, k_cache, v_cache, slots)
    assert torch.count_nonzero(k_cache.abs().sum(-1)) == 2 * 2  # 2 tokens stored, 2 heads each


def test_a_decode_plan_of_equal_contexts_reads_them_exactly_without_a_mask() -> None:
    tables = torch.tensor([[4, 1], [0, 3]], dtype=torch.int32)  # block size 16, contexts of 20 tokens
    plan = build_plan(tables, torch.tensor([20, 20], dtype=torch.int32), None, 16, 2)
    assert (plan.span, plan.padded_rows, plan.mask) == (20, None, None)
    first = (4 * 16 + torch.arange(16)).tolist() + (1 * 16 + torch.arange(4)).tolist()  # seq 0's tokens
    assert plan.rows.view(2, 2, 20)[0, 1].tolist() == [t * 2 + 1 for t in first]  # kv head 1
    ragged = build_plan(tables, torch.tensor([20, 17], dtype=torch.int32), None, 16, 2)
    assert ragged.span == 20
    assert ragged.mask is not None
    assert ragged.padded_rows is not None
    assert ragged.padded_rows.numel() == 2 * 3  # seq 1's 3 rows past its end, each kv head


def test_a_windowed_decode_reads_each_window_alone() -> None:
    tables = torch.tensor([[4, 1, 2], [0, 3, 5]], dtype=torch.int32)  # block size 16
    plan = build_plan(tables, torch.tensor([40, 33], dtype=torch.int32), 10, 16, 2)
    assert (plan.span, plan.padded_rows, plan.mask) == (10, None, None)  # both past the window
    tokens = [(1 * 16 + t) for t in range(14, 16)] + [(2 * 16 + t) for t in range(8)]  # seq 0: 30..39
    assert plan.rows.view(2, 2, 10)[0, 0].tolist() == [t * 2 for t in tokens]
    tokens = [(3 * 16 + t) for t in range(7, 16)] + [5 * 16]  # seq 1: 23..32
    assert plan.rows.view(2, 2, 10)[1, 1].tolist() == [t * 2 + 1 for t in tokens]
    for contexts in ([20, 37, 90], [20, 37, 90, 6]):  # windows at other offsets; then one short of it
        args = _decode_args(_batch(contexts, [1] * len(contexts), (8, 2, 64), torch.float32), 0.09)
        _close(FAST.decode_attention(*args, window=16), REF.decode_attention(*args, window=16), torch.float32)
