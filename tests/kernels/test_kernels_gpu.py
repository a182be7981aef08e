"""GPU checks: compiled Triton kernels against the reference on serving-sized shapes (Llama-3-8B-like
heads), block copies between CUDA and CPU pools, and quantised (int8 / fp8) pools on CUDA through the SDPA
and Triton kernels and the CPU tier. Skipped without CUDA."""

from __future__ import annotations

from types import ModuleType

import pytest
import torch

from kvgate.kernels import ReferenceKernels, SdpaKernels
from kvgate.kernels.testing import context_slots, random_paged_batch

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]

REF = ReferenceKernels()
TOLERANCE = {torch.float32: 2e-5, torch.float16: 2e-3, torch.bfloat16: 2e-2}
DTYPES = [torch.float32, torch.float16, torch.bfloat16]


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize(("num_heads", "num_kv_heads", "head_dim"), [(32, 8, 128), (28, 4, 128), (14, 2, 64)])
def test_decode_realistic(
    triton_backend: ModuleType, dtype: torch.dtype, num_heads: int, num_kv_heads: int, head_dim: int
) -> None:
    contexts = [1, 17, 300, 1024, 2049, 4000, 777, 64]
    batch = random_paged_batch(
        contexts,
        [1] * len(contexts),
        num_heads=num_heads,
        num_kv_heads=num_kv_heads,
        head_dim=head_dim,
        dtype=dtype,
        device="cuda",
        seed=5,
    )
    args = (batch.q, batch.k_cache, batch.v_cache, batch.block_tables, batch.context_lens, head_dim**-0.5)
    out = triton_backend.TritonKernels().decode_attention(*args)
    expected = REF.decode_attention(*args)
    torch.testing.assert_close(out.float(), expected.float(), atol=TOLERANCE[dtype], rtol=0)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_prefill_with_cached_prefix_realistic(triton_backend: ModuleType, dtype: torch.dtype) -> None:
    # a fresh prompt, a prefix hit followed by a new suffix, and a chunk of a chunked prefill
    contexts, queries = [1500, 2100, 3000, 700], [1500, 300, 512, 1]
    batch = random_paged_batch(
        contexts, queries, num_heads=32, num_kv_heads=8, head_dim=128, dtype=dtype, device="cuda", seed=9
    )
    args = (
        batch.q,
        batch.k_cache,
        batch.v_cache,
        batch.block_tables,
        batch.cu_seqlens_q,
        batch.context_lens,
        128**-0.5,
    )
    out = triton_backend.TritonKernels().prefill_attention(*args)
    expected = REF.prefill_attention(*args)
    torch.testing.assert_close(out.float(), expected.float(), atol=TOLERANCE[dtype], rtol=0)


def test_write_kv_realistic(triton_backend: ModuleType) -> None:
    k_cache, v_cache = (torch.zeros(512, 16, 8, 128, dtype=torch.bfloat16, device="cuda") for _ in "kv")
    k, v = (torch.randn(3000, 8, 128, device="cuda").bfloat16() for _ in "kv")
    slots = torch.randperm(512 * 16, device="cuda")[:3000]
    slots[::7] = -1
    expected = [k_cache.clone(), v_cache.clone()]
    REF.write_kv(k, v, *expected, slots)
    triton_backend.TritonKernels().write_kv(k, v, k_cache, v_cache, slots)
    assert torch.equal(k_cache, expected[0])
    assert torch.equal(v_cache, expected[1])


@pytest.mark.parametrize("pinned", [True, False], ids=["pinned", "pageable"])
@pytest.mark.parametrize("backend", ["reference", "triton"])
def test_copy_blocks_between_cuda_and_cpu_is_exact(
    triton_backend: ModuleType, pinned: bool, backend: str
) -> None:
    kernels = triton_backend.TritonKernels() if backend == "triton" else REF
    gpu = [torch.randn(64, 16, 8, 128, device="cuda").half() for _ in "kv"]
    cpu = [torch.zeros(32, 16, 8, 128, dtype=torch.float16, pin_memory=pinned) for _ in "kv"]
    # offload GPU blocks 3, 40, 9 into CPU slots 0, 31, 5 ...
    kernels.copy_blocks(*gpu, *cpu, torch.tensor([3, 40, 9]), torch.tensor([0, 31, 5]))
    assert torch.equal(cpu[0][31], gpu[0][40].cpu())
    assert torch.equal(cpu[1][5], gpu[1][9].cpu())
    # ... then swap them back in elsewhere: the round trip is exact
    kernels.copy_blocks(*cpu, *gpu, torch.tensor([0, 31, 5]), torch.tensor([60, 61, 62]))
    assert torch.equal(gpu[0][60:63], gpu[0][[3, 40, 9]])
    assert torch.equal(gpu[1][60:63], gpu[1][[3, 40, 9]])


def test_copy_blocks_on_device_kernel(triton_backend: ModuleType) -> None:
    src = [torch.randn(100, 16, 8, 128, device="cuda").bfloat16() for _ in "kv"]
    dst = [torch.zeros_like(s) for s in src]
    ids = torch.randperm(100, device="cuda")[:50], torch.randperm(100, device="cuda")[:50]
    triton_backend.TritonKernels().copy_blocks(*src, *dst, *ids)
    assert torch.equal(dst[0][ids[1]], src[0][ids[0]])
    assert torch.equal(dst[1][ids[1]], src[1][ids[0]])


def test_compiled_kernels_reject_cpu_tensors(triton_backend: ModuleType) -> None:
    batch = random_paged_batch([5], [1], num_heads=2, num_kv_heads=1, head_dim=64)
    with pytest.raises(ValueError, match="reference"):
        triton_backend.TritonKernels().decode_attention(
            batch.q, batch.k_cache, batch.v_cache, batch.block_tables, batch.context_lens, 1.0
        )


@pytest.mark.parametrize("backend", ["sdpa", "triton"])
@pytest.mark.parametrize("dtype", [torch.int8, torch.float8_e4m3fn], ids=str)
@pytest.mark.parametrize("pinned", [True, False], ids=["pinned", "pageable"])
def test_quantised_pools_on_cuda_attend_and_round_trip_through_the_cpu_tier(
    triton_backend: ModuleType, backend: str, dtype: torch.dtype, pinned: bool
) -> None:
    """int8 / fp8 pools on CUDA (SDPA and compiled Triton kernels): the decode equals the CPU reference's
    over the same bytes and scales, and an offload to the CPU tier and back is exact."""
    kernels = triton_backend.TritonKernels() if backend == "triton" else SdpaKernels()
    batch = random_paged_batch([300, 17, 64], [1, 1, 1], num_heads=32, num_kv_heads=8, head_dim=128,
                               device="cuda", seed=2)  # fmt: skip
    shape = batch.k_cache.shape
    pools = [torch.zeros(shape, dtype=dtype, device="cuda") for _ in "kv"]
    scales = [torch.zeros(shape[0], shape[2], device="cuda") for _ in "kv"]
    slots = context_slots(batch.block_tables, batch.context_lens, shape[1])
    k, v = batch.k_cache.flatten(0, 1)[slots], batch.v_cache.flatten(0, 1)[slots]
    kernels.write_kv(k, v, *pools, slots, k_scale=scales[0], v_scale=scales[1])
    tables, lens = batch.block_tables, batch.context_lens
    out = kernels.decode_attention(batch.q, *pools, tables, lens, 0.1, k_scale=scales[0], v_scale=scales[1])
    cpu = [t.cpu() for t in (*pools, *scales)]
    expected = REF.decode_attention(batch.q.cpu(), cpu[0], cpu[1], tables.cpu(), lens.cpu(), 0.1,
                                    k_scale=cpu[2], v_scale=cpu[3])  # fmt: skip
    torch.testing.assert_close(out.cpu(), expected, atol=1e-4, rtol=0)
    tier = [torch.zeros(shape, dtype=dtype, pin_memory=pinned) for _ in "kv"]
    tier_scales = [torch.zeros(shape[0], shape[2], pin_memory=pinned) for _ in "kv"]
    ids = torch.arange(shape[0])
    kernels.copy_blocks(
        *pools, *tier, ids, ids.flip(0), src_scales=tuple(scales), dst_scales=tuple(tier_scales)
    )
    saved = [t.clone() for t in (*pools, *scales)]
    for t in (*pools, *scales):
        t.zero_()
    kernels.copy_blocks(
        *tier, *pools, ids.flip(0), ids, src_scales=tuple(tier_scales), dst_scales=tuple(scales)
    )
    for now, before in zip((*pools, *scales), saved, strict=True):
        assert torch.equal(now.view(torch.uint8) if now.element_size() == 1 else now,
                           before.view(torch.uint8) if before.element_size() == 1 else before)  # fmt: skip
