"""Triton kernels against the reference backend on small shapes: interpreted on CPU
(``TRITON_INTERPRET=1``, see conftest), compiled where CUDA is present."""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType

import pytest
import torch

from kvgate.kernels import ReferenceKernels, get_kernels
from kvgate.kernels.testing import PagedBatch, random_paged_batch

REF = ReferenceKernels()
HEADS = [(4, 1, 64), (6, 2, 80), (8, 2, 64)]  # (num_heads, num_kv_heads, head_dim)
DTYPES = [torch.float32, torch.float16, torch.bfloat16]
TOLERANCE = {torch.float32: 1e-5, torch.float16: 2e-3, torch.bfloat16: 2e-2}
SMALL_TILES = {"prefill_block_m": 16, "prefill_block_n": 16, "decode_block_n": 16}
FORCED_SPLITS = {"decode_block_n": 16, "decode_min_split_tokens": 16, "decode_target_programs": 4096}


def _skip_interpreted_bf16(dtype: torch.dtype, device: torch.device) -> None:
    if dtype == torch.bfloat16 and device.type == "cpu":
        pytest.skip(
            "Triton's interpreter multiplies bf16 tl.dot operands as raw uint16 bits; "
            "bf16 attention is checked on CUDA (gpu tests)"
        )


def _batch(
    contexts: list[int],
    queries: list[int],
    heads: tuple[int, int, int],
    dtype: torch.dtype,
    device: torch.device,
) -> PagedBatch:
    num_heads, num_kv_heads, head_dim = heads
    return random_paged_batch(
        contexts,
        queries,
        num_heads=num_heads,
        num_kv_heads=num_kv_heads,
        head_dim=head_dim,
        dtype=dtype,
        device=device,
        seed=sum(contexts),
    )


def _close(actual: torch.Tensor, expected: torch.Tensor, dtype: torch.dtype) -> None:
    assert actual.dtype == expected.dtype
    torch.testing.assert_close(actual.float(), expected.float(), atol=TOLERANCE[dtype], rtol=0)


@pytest.mark.parametrize("tiles", [SMALL_TILES, {}], ids=["small-tiles", "default-tiles"])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("heads", HEADS, ids=str)
def test_prefill_matches_reference(
    make_triton: Callable[..., object],
    kernel_device: torch.device,
    heads: tuple[int, int, int],
    dtype: torch.dtype,
    tiles: dict,
) -> None:
    _skip_interpreted_bf16(dtype, kernel_device)
    # whole prompt, unaligned cached prefixes, a long chunk spanning several query tiles, one query after
    # a long prefix, a sequence with no new token, and one exactly one block long
    batch = _batch([37, 50, 150, 100, 33, 16], [37, 13, 70, 1, 0, 16], heads, dtype, kernel_device)
    args = (
        batch.q,
        batch.k_cache,
        batch.v_cache,
        batch.block_tables,
        batch.cu_seqlens_q,
        batch.context_lens,
        0.11,
    )
    _close(make_triton(**tiles).prefill_attention(*args), REF.prefill_attention(*args), dtype)


@pytest.mark.parametrize("splits", [{}, FORCED_SPLITS], ids=["one-split", "split-k"])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("heads", HEADS, ids=str)
def test_decode_matches_reference(
    make_triton: Callable[..., object],
    kernel_device: torch.device,
    heads: tuple[int, int, int],
    dtype: torch.dtype,
    splits: dict,
) -> None:
    _skip_interpreted_bf16(dtype, kernel_device)
    contexts = [1, 15, 16, 17, 90, 200]
    batch = _batch(contexts, [1] * len(contexts), heads, dtype, kernel_device)
    args = (batch.q, batch.k_cache, batch.v_cache, batch.block_tables, batch.context_lens, 0.09)
    _close(make_triton(**splits).decode_attention(*args), REF.decode_attention(*args), dtype)


@pytest.mark.parametrize(("window", "softcap"), [(5, None), (16, None), (None, 2.0), (40, 3.0)])
def test_window_and_softcap_match_reference(
    make_triton: Callable[..., object],
    kernel_device: torch.device,
    window: int | None,
    softcap: float | None,
) -> None:
    # prefill: windows inside one tile and across tiles, cached prefixes longer than the window; decode
    # split-k, so that whole splits fall before the window
    options = {"window": window, "softcap": softcap}
    batch = _batch([37, 50, 150, 33], [37, 13, 70, 0], (8, 2, 64), torch.float32, kernel_device)
    args = (batch.q, batch.k_cache, batch.v_cache, batch.block_tables, batch.cu_seqlens_q, batch.context_lens)
    expected = REF.prefill_attention(*args, 0.11, **options)
    _close(make_triton(**SMALL_TILES).prefill_attention(*args, 0.11, **options), expected, torch.float32)
    contexts = [1, 15, 17, 90, 200]
    batch = _batch(contexts, [1] * len(contexts), (8, 2, 64), torch.float32, kernel_device)
    args = (batch.q, batch.k_cache, batch.v_cache, batch.block_tables, batch.context_lens)
    expected = REF.decode_attention(*args, 0.09, **options)
    _close(make_triton(**FORCED_SPLITS).decode_attention(*args, 0.09, **options), expected, torch.float32)


def test_decode_equals_one_token_prefill(
    make_triton: Callable[..., object], kernel_device: torch.device
) -> None:
    batch = _batch([3, 40, 77], [1, 1, 1], (8, 2, 64), torch.float32, kernel_device)
    kernels = make_triton(**FORCED_SPLITS)
    decoded = kernels.decode_attention(
        batch.q, batch.k_cache, batch.v_cache, batch.block_tables, batch.context_lens, 0.125
    )
    prefilled = kernels.prefill_attention(
        batch.q,
        batch.k_cache,
        batch.v_cache,
        batch.block_tables,
        batch.cu_seqlens_q,
        batch.context_lens,
        0.125,
    )
    torch.testing.assert_close(decoded, prefilled, atol=1e-5, rtol=0)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_write_kv_matches_reference(
    make_triton: Callable[..., object], kernel_device: torch.device, dtype: torch.dtype
) -> None:
    # k and v are strided views of one fused qkv projection, as the engine produces them
    qkv = torch.randn(9, 4 + 2 + 2, 80, device=kernel_device).to(dtype)
    k, v = qkv[:, 4:6], qkv[:, 6:8]  # [tokens, kv_heads=2, 80], non-contiguous
    slots = torch.tensor([5, -1, 16, 17, 63, -1, 0, 40, 33], device=kernel_device)
    expected = [torch.zeros(4, 16, 2, 80, dtype=dtype, device=kernel_device) for _ in "kv"]
    actual = [c.clone() for c in expected]
    REF.write_kv(k, v, *expected, slots)
    make_triton().write_kv(k, v, *actual, slots)
    assert torch.equal(actual[0], expected[0])
    assert torch.equal(actual[1], expected[1])


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_copy_blocks_same_device_is_exact(
    make_triton: Callable[..., object], kernel_device: torch.device, dtype: torch.dtype
) -> None:
    src = [torch.randn(7, 16, 2, 80, device=kernel_device).to(dtype) for _ in "kv"]
    dst = [torch.randn(5, 16, 2, 80, device=kernel_device).to(dtype) for _ in "kv"]
    expected = [d.clone() for d in dst]
    # int32 source ids, int64 destination ids: both are accepted
    ids = (
        torch.tensor([6, 0, 3], dtype=torch.int32, device=kernel_device),
        torch.tensor([2, 4, 0], device=kernel_device),
    )
    REF.copy_blocks(*src, *expected, *ids)
    make_triton(copy_block=1024).copy_blocks(*src, *dst, *ids)  # 2560-element blocks: 3 chunks each
    assert torch.equal(dst[0], expected[0])
    assert torch.equal(dst[1], expected[1])


def test_registry_builds_the_triton_backend(triton_backend: ModuleType) -> None:
    kernels = get_kernels("triton")
    assert isinstance(kernels, triton_backend.TritonKernels)
    assert kernels.name == "triton"
