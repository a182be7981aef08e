"""The reference backend is the specification: check it against textbook dense attention on scattered
paged layouts, and check its cache operations slot by slot."""

from __future__ import annotations

import math

import pytest
import torch

from kvgate.kernels import ReferenceKernels, get_kernels
from kvgate.kernels.testing import PagedBatch, dense_attention, random_paged_batch

REF = ReferenceKernels()
HEADS = [(4, 1, 64), (6, 2, 80), (8, 2, 64), (4, 2, 80)]  # (num_heads, num_kv_heads, head_dim)
TOLERANCE = {torch.float32: 1e-5, torch.float16: 2e-3, torch.bfloat16: 2e-2}


def _prefill(batch: PagedBatch, scale: float, **options: float | None) -> torch.Tensor:
    return REF.prefill_attention(
        batch.q,
        batch.k_cache,
        batch.v_cache,
        batch.block_tables,
        batch.cu_seqlens_q,
        batch.context_lens,
        scale,
        **options,  # type: ignore[arg-type]
    )


def _assert_matches_dense(
    batch: PagedBatch, out: torch.Tensor, scale: float, atol: float, **options: float | None
) -> None:
    for b in range(batch.context_lens.shape[0]):
        k, v = batch.dense_kv(b)
        rows = slice(int(batch.cu_seqlens_q[b]), int(batch.cu_seqlens_q[b + 1]))
        expected = dense_attention(batch.queries(b), k, v, scale, **options)  # type: ignore[arg-type]
        torch.testing.assert_close(out[rows].float(), expected, atol=atol, rtol=0)


@pytest.mark.parametrize(("num_heads", "num_kv_heads", "head_dim"), HEADS)
@pytest.mark.parametrize("seed", [0, 1])
def test_prefill_matches_dense_attention(num_heads: int, num_kv_heads: int, head_dim: int, seed: int) -> None:
    # Plain prefill (37 of 37), cached prefixes not aligned to blocks (13 new after 37), one query after
    # a long prefix, an exactly-one-block sequence, and a sequence with no new token at all.
    contexts, queries = [37, 50, 100, 16, 33], [37, 13, 1, 16, 0]
    batch = random_paged_batch(
        contexts, queries, num_heads=num_heads, num_kv_heads=num_kv_heads, head_dim=head_dim, seed=seed
    )
    scale = 1 / math.sqrt(head_dim)
    out = _prefill(batch, scale)
    assert out.shape == batch.q.shape
    assert out.dtype == batch.q.dtype
    _assert_matches_dense(batch, out, scale, atol=1e-5)


def test_chunked_prefill_equals_whole_prefill() -> None:
    # One 70-token prompt prefilled in chunks of 32, 32 and 6 gives the rows of the one-shot prefill.
    whole = random_paged_batch([70], [70], num_heads=4, num_kv_heads=2, head_dim=64, seed=3)
    expected = _prefill(whole, 0.125)
    for start, end in [(0, 32), (32, 64), (64, 70)]:
        cu = torch.tensor([0, end - start], dtype=torch.int32)
        out = REF.prefill_attention(
            whole.q[start:end],
            whole.k_cache,
            whole.v_cache,
            whole.block_tables,
            cu,
            torch.tensor([end], dtype=torch.int32),
            0.125,
        )
        torch.testing.assert_close(out, expected[start:end], atol=1e-6, rtol=0)


@pytest.mark.parametrize(("num_heads", "num_kv_heads", "head_dim"), HEADS)
def test_decode_matches_dense_attention(num_heads: int, num_kv_heads: int, head_dim: int) -> None:
    contexts = [1, 15, 16, 17, 90]
    batch = random_paged_batch(
        contexts,
        [1] * len(contexts),
        num_heads=num_heads,
        num_kv_heads=num_kv_heads,
        head_dim=head_dim,
        seed=7,
    )
    out = REF.decode_attention(
        batch.q, batch.k_cache, batch.v_cache, batch.block_tables, batch.context_lens, 0.1
    )
    _assert_matches_dense(batch, out, 0.1, atol=1e-5)


@pytest.mark.parametrize(("window", "softcap"), [(5, None), (16, None), (None, 2.0), (7, 3.0)])
def test_sliding_window_and_softcap_match_dense_attention(window: int | None, softcap: float | None) -> None:
    # Windows shorter than a block, of exactly one block, and with soft-capping; cached prefixes longer
    # than the window (its start falls inside the prefix) in prefill, and decodes at 1..90 tokens.
    options = {"window": window, "softcap": softcap}
    batch = random_paged_batch([37, 50, 3], [37, 13, 3], num_heads=4, num_kv_heads=2, head_dim=64, seed=5)
    _assert_matches_dense(batch, _prefill(batch, 0.125, **options), 0.125, atol=1e-5, **options)
    contexts = [1, 15, 16, 17, 90]
    batch = random_paged_batch(contexts, [1] * 5, num_heads=4, num_kv_heads=2, head_dim=64, seed=6)
    out = REF.decode_attention(
        batch.q, batch.k_cache, batch.v_cache, batch.block_tables, batch.context_lens, 0.125, **options
    )
    _assert_matches_dense(batch, out, 0.125, atol=1e-5, **options)


def test_a_window_hides_exactly_the_tokens_before_it() -> None:
    # Values 0..9 at positions 0..9 and equal keys: a query sees the mean of the values it may see.
    k = torch.ones(10, 1, 2)
    v = torch.arange(10.0)[:, None, None].expand(10, 1, 2).contiguous()
    out = dense_attention(torch.ones(10, 1, 2), k, v, 1.0, window=3)[:, 0, 0]
    torch.testing.assert_close(out, torch.tensor([0.0, 0.5, 1, 2, 3, 4, 5, 6, 7, 8]))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_low_precision_accumulates_in_fp32(dtype: torch.dtype) -> None:
    batch = random_paged_batch([40, 23], [9, 23], num_heads=8, num_kv_heads=2, head_dim=64, dtype=dtype)
    out = _prefill(batch, 0.125)
    assert out.dtype == dtype
    _assert_matches_dense(batch, out, 0.125, atol=TOLERANCE[dtype])


def test_write_kv_stores_each_token_at_its_slot_and_skips_minus_one() -> None:
    k_cache = torch.zeros(4, 16, 2, 8)
    v_cache = torch.zeros(4, 16, 2, 8)
    k, v = torch.randn(3, 2, 8), torch.randn(3, 2, 8)
    # token 0 -> block 2 offset 5; token 1 is padding; token 2 -> block 0 offset 15
    REF.write_kv(k, v, k_cache, v_cache, torch.tensor([37, -1, 15]))
    torch.testing.assert_close(k_cache[2, 5], k[0], rtol=0, atol=0)
    torch.testing.assert_close(v_cache[0, 15], v[2], rtol=0, atol=0)
    assert int((k_cache != 0).any(dim=(2, 3)).sum()) == 2  # nothing else written, token 1 nowhere


def test_copy_blocks_cpu_to_cpu_is_exact() -> None:
    src_k, src_v = torch.randn(6, 16, 2, 8), torch.randn(6, 16, 2, 8)
    dst_k, dst_v = torch.zeros(5, 16, 2, 8), torch.zeros(5, 16, 2, 8)
    REF.copy_blocks(src_k, src_v, dst_k, dst_v, torch.tensor([4, 0, 5]), torch.tensor([1, 3, 0]))
    assert torch.equal(dst_k[1], src_k[4])
    assert torch.equal(dst_v[3], src_v[0])
    assert torch.equal(dst_k[0], src_k[5])
    assert not dst_k[[2, 4]].any()
    assert not dst_v[[2, 4]].any()


def test_copy_blocks_within_one_pool() -> None:
    k, v = torch.randn(4, 16, 1, 8), torch.randn(4, 16, 1, 8)
    before_k, before_v = k.clone(), v.clone()
    REF.copy_blocks(k, v, k, v, torch.tensor([0, 1]), torch.tensor([2, 3]))
    assert torch.equal(k[2:], before_k[:2])
    assert torch.equal(v[:2], before_v[:2])


def test_random_paged_batch_scatters_blocks_and_poisons_unowned_slots() -> None:
    batch = random_paged_batch([5, 20], [5, 4], num_heads=2, num_kv_heads=1, head_dim=8, seed=1)
    owned = batch.block_tables[0, :1].tolist() + batch.block_tables[1, :2].tolist()
    assert len(set(owned)) == 3  # distinct blocks
    assert batch.block_tables[0, 1] not in owned  # padding points at a block no sequence owns
    assert batch.k_cache[batch.block_tables[0, 1]].isnan().all()
    assert batch.k_cache[owned[0], 5:].isnan().all()
    assert not batch.k_cache[owned[0], :5].isnan().any()
    assert batch.cu_seqlens_q.tolist() == [0, 5, 9]


def test_registry_builds_backends_by_name() -> None:
    assert get_kernels("reference").name == "reference"
    with pytest.raises(KeyError, match="known: reference, sdpa, triton"):
        get_kernels("cuda-magic")


@pytest.mark.parametrize(
    ("q_shape", "message"),
    [((3, 4, 32), "q must be"), ((3, 3, 64), "must divide")],
)
def test_shape_errors_are_reported(q_shape: tuple[int, int, int], message: str) -> None:
    batch = random_paged_batch([3], [3], num_heads=4, num_kv_heads=2, head_dim=64)
    with pytest.raises(ValueError, match=message):
        REF.prefill_attention(
            torch.randn(q_shape),
            batch.k_cache,
            batch.v_cache,
            batch.block_tables,
            batch.cu_seqlens_q,
            batch.context_lens,
            1.0,
        )
