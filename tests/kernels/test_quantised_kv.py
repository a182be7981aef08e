"""Quantised KV pools (int8, fp8 e4m3 with a float32 scale per block and KV head) in the reference and
SDPA backends: a quantised write then attention equals attention over the dequantised cache (prefill,
prefill after a cached prefix, decode, GQA), the requantisation invariant holds for random token-by-token
writes (Hypothesis), block copies carry the scales (a CPU-tier round trip attends the same), and
misuse is refused. The Triton kernels read quantised pools as the reference does (int8 in the interpreter,
fp8 too on CUDA)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from kvgate.kernels import ReferenceKernels, SdpaKernels
from kvgate.kernels.quant import QMAX
from kvgate.kernels.testing import PagedBatch, context_slots, dense_attention, random_paged_batch

BACKENDS = [ReferenceKernels(), SdpaKernels()]
QDTYPES = [torch.int8, torch.float8_e4m3fn]
HEADS = [(4, 4, 32), (8, 2, 64), (9, 3, 64)]  # (num_heads, kv_heads, head_dim): MHA and GQA
SCALE = 0.125


def _pools(batch: PagedBatch, dtype: torch.dtype) -> tuple[torch.Tensor, ...]:
    """Empty quantised K, V pools shaped like the batch's, and their zero (empty) scales."""
    num_blocks, _, kv_heads, _ = batch.k_cache.shape
    k, v = (torch.zeros(batch.k_cache.shape, dtype=dtype) for _ in "kv")
    k_scale, v_scale = (torch.zeros(num_blocks, kv_heads) for _ in "kv")
    return k, v, k_scale, v_scale


def _dequantised(pool: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    return pool.float() * scale[:, None, :, None]


def _write_contexts(kernels, batch: PagedBatch, pools, split: int = 0) -> None:
    """Writes every sequence's context (the batch's float K/V) into the quantised pools: the first
    ``split`` tokens of each in one call (a cached prefix), the rest in a second call."""
    block_size = batch.k_cache.shape[1]
    k_all, v_all = batch.k_cache.flatten(0, 1), batch.v_cache.flatten(0, 1)
    slots = []
    for b in range(len(batch.context_lens)):
        one = slice(b, b + 1)
        slots.append(context_slots(batch.block_tables[one], batch.context_lens[one], block_size))
    for part in (slice(0, split), slice(split, None)):
        chosen = torch.cat([s[part] for s in slots])
        k_pool, v_pool, k_scale, v_scale = pools
        k, v = k_all[chosen], v_all[chosen]
        kernels.write_kv(k, v, k_pool, v_pool, chosen, k_scale=k_scale, v_scale=v_scale)


def _expected(batch: PagedBatch, pools, b: int) -> torch.Tensor:
    """Dense attention of sequence ``b`` over its dequantised context: the specification."""
    k_pool, v_pool, k_scale, v_scale = pools
    one = slice(b, b + 1)
    slots = context_slots(batch.block_tables[one], batch.context_lens[one], k_pool.shape[1])
    k = _dequantised(k_pool, k_scale).flatten(0, 1)[slots]
    v = _dequantised(v_pool, v_scale).flatten(0, 1)[slots]
    original = batch.dense_kv(b)
    for stored, before in zip((k, v), original, strict=True):  # near the floats (fp8: 3 mantissa bits,
        torch.testing.assert_close(stored, before, atol=0.03, rtol=2**-3)  # rounded twice if requantised)
    return dense_attention(batch.queries(b), k, v, SCALE)


@pytest.mark.parametrize("kernels", BACKENDS, ids=lambda k: k.name)
@pytest.mark.parametrize("dtype", QDTYPES, ids=str)
@pytest.mark.parametrize("heads", HEADS, ids=str)
@pytest.mark.parametrize("split", [0, 16, 21], ids=["whole", "cached-block", "cached-unaligned"])
def test_prefill_attends_to_the_dequantised_cache(kernels, dtype, heads, split) -> None:
    num_heads, kv_heads, head_dim = heads
    contexts, queries = [37, 50, 70, 33], [37 - split, 50 - split, 70 - split, 33 - split]
    batch = random_paged_batch(contexts, queries, num_heads=num_heads, num_kv_heads=kv_heads,
                               head_dim=head_dim, seed=split + num_heads)  # fmt: skip
    pools = _pools(batch, dtype)
    _write_contexts(kernels, batch, pools, split)
    k_pool, v_pool, k_scale, v_scale = pools
    out = kernels.prefill_attention(
        batch.q, k_pool, v_pool, batch.block_tables, batch.cu_seqlens_q, batch.context_lens, SCALE,
        k_scale=k_scale, v_scale=v_scale,
    )  # fmt: skip
    for b in range(len(contexts)):
        rows = slice(int(batch.cu_seqlens_q[b]), int(batch.cu_seqlens_q[b + 1]))
        torch.testing.assert_close(out[rows], _expected(batch, pools, b), atol=2e-5, rtol=0)


@pytest.mark.parametrize("kernels", BACKENDS, ids=lambda k: k.name)
@pytest.mark.parametrize("dtype", QDTYPES, ids=str)
@pytest.mark.parametrize("heads", HEADS, ids=str)
def test_decode_attends_to_the_dequantised_cache(kernels, dtype, heads) -> None:
    num_heads, kv_heads, head_dim = heads
    contexts = [1, 15, 16, 17, 90]
    batch = random_paged_batch(contexts, [1] * len(contexts), num_heads=num_heads, num_kv_heads=kv_heads,
                               head_dim=head_dim, seed=num_heads)  # fmt: skip
    pools = _pools(batch, dtype)
    _write_contexts(kernels, batch, pools, split=-1)  # the last token of each in a decode-like write
    k_pool, v_pool, k_scale, v_scale = pools
    out = kernels.decode_attention(batch.q, k_pool, v_pool, batch.block_tables, batch.context_lens, SCALE,
                                   k_scale=k_scale, v_scale=v_scale)  # fmt: skip
    for b in range(len(contexts)):
        torch.testing.assert_close(out[b : b + 1], _expected(batch, pools, b), atol=2e-5, rtol=0)


@pytest.mark.parametrize("dtype", QDTYPES, ids=str)
def test_the_backends_agree_in_bfloat16(dtype) -> None:
    batch = random_paged_batch([40, 9], [1, 1], num_heads=8, num_kv_heads=2, head_dim=64, seed=3)
    pools = _pools(batch, dtype)
    _write_contexts(BACKENDS[0], batch, pools)
    k_pool, v_pool, k_scale, v_scale = pools
    q = batch.q.bfloat16()
    outs = [kernels.decode_attention(q, k_pool, v_pool, batch.block_tables, batch.context_lens, SCALE,
                                     k_scale=k_scale, v_scale=v_scale) for kernels in BACKENDS]  # fmt: skip
    assert outs[0].dtype == outs[1].dtype == torch.bfloat16
    torch.testing.assert_close(outs[0].float(), outs[1].float(), atol=2e-2, rtol=0)


def _step_bound(dtype: torch.dtype, value: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """The most one quantisation of ``value`` with ``scale`` can err (see ``kvgate.kernels.quant``)."""
    if dtype == torch.int8:
        return scale / 2
    return value.abs() * 2**-4 + scale * 2**-10


@settings(max_examples=40, deadline=None)
@given(
    dtype=st.sampled_from(QDTYPES),
    tokens=st.lists(
        st.tuples(st.integers(0, 2), st.floats(-6, 3)), min_size=1, max_size=40
    ),  # (sequence, log10 of the token's magnitude)
    seed=st.integers(0, 2**16),
)
def test_token_by_token_writes_keep_every_value_within_its_quantisation_error(dtype, tokens, seed) -> None:
    """Three sequences append tokens one at a time (interleaved, as decode steps do) into 4-token blocks;
    each token's magnitude is drawn over nine decades, so blocks grow their scale and requantise often.
    After every write, every stored value dequantises within (requantisations + 1) steps of its original
    at its block's current scale, and no scale is below what its block's values need."""
    block_size, kv_heads, head_dim = 4, 2, 8
    gen = torch.Generator().manual_seed(seed)
    pool = torch.zeros(40, block_size, kv_heads, head_dim, dtype=dtype)
    scale = torch.zeros(40, kv_heads)
    lengths = [0, 0, 0]
    blocks_of = [[3 * i + s for i in range(14)] for s in range(3)]  # sequence s owns blocks s, s+3, ...
    originals: dict[int, torch.Tensor] = {}  # slot -> [kv_heads, head_dim]
    requantised: dict[int, torch.Tensor] = {}  # slot -> [kv_heads] times its (block, head) grew since
    kernels = ReferenceKernels()
    for seq, magnitude in tokens:
        position = lengths[seq]
        lengths[seq] += 1
        slot = blocks_of[seq][position // block_size] * block_size + position % block_size
        x = torch.randn(1, kv_heads, head_dim, generator=gen) * 10**magnitude
        block = slot // block_size
        before = scale[block].clone()
        kernels.write_kv(x, x, pool, pool.clone(), torch.tensor([slot]), k_scale=scale, v_scale=scale.clone())
        grew = scale[block] > before
        for other in originals:
            if other // block_size == block and other != slot:
                requantised[other] += grew.float()
        originals[slot], requantised[slot] = x[0], torch.zeros(kv_heads)
        for s, original in originals.items():
            b = s // block_size
            stored = pool[b, s % block_size].float() * scale[b][:, None]  # [kv_heads, head_dim]
            steps = (requantised[s] + 1)[:, None]
            bound = steps * _step_bound(dtype, original, scale[b][:, None]) * (1 + 2**-4) ** steps
            assert ((stored - original).abs() <= bound + 1e-6 * original.abs()).all(), (s, b)
            assert (original.abs().amax(-1) <= scale[b] * QMAX[dtype] * (1 + 1e-6)).all()


def test_a_block_written_from_its_start_gets_a_fresh_scale() -> None:
    pool, scale = torch.zeros(2, 4, 1, 8, dtype=torch.int8), torch.zeros(2, 1)
    kernels, big, small = ReferenceKernels(), torch.full((4, 1, 8), 100.0), torch.full((1, 1, 8), 0.01)
    kernels.write_kv(big, big, pool, pool.clone(), torch.arange(4), k_scale=scale, v_scale=scale.clone())
    assert scale[0, 0] == pytest.approx(100 / 127)
    first = torch.tensor([0])
    kernels.write_kv(small, small, pool, pool.clone(), first, k_scale=scale, v_scale=scale.clone())
    assert scale[0, 0] == pytest.approx(0.01 / 127)  # the block was reused: its old values are stale
    assert pool[0, 0, 0].float().mul(scale[0, 0]).allclose(small[0, 0], atol=1e-4)


@pytest.mark.parametrize("kernels", BACKENDS, ids=lambda k: k.name)
@pytest.mark.parametrize("dtype", QDTYPES, ids=str)
def test_an_offload_and_reload_keeps_the_scales_and_the_attention(kernels, dtype) -> None:
    batch = random_paged_batch([40, 25], [1, 1], num_heads=4, num_kv_heads=2, head_dim=32, seed=5)
    gpu = _pools(batch, dtype)
    _write_contexts(kernels, batch, gpu)
    k_pool, v_pool, k_scale, v_scale = gpu
    args = (batch.q, k_pool, v_pool, batch.block_tables, batch.context_lens, SCALE)
    before = kernels.decode_attention(*args, k_scale=k_scale, v_scale=v_scale)
    saved = k_scale.clone(), v_scale.clone()
    used = batch.block_tables.flatten().unique().long()
    cpu = _pools(batch, dtype)  # the CPU tier: blocks at other ids
    parked = torch.randperm(k_pool.shape[0])[: used.shape[0]]
    kernels.copy_blocks(k_pool, v_pool, cpu[0], cpu[1], used, parked,
                        src_scales=(k_scale, v_scale), dst_scales=(cpu[2], cpu[3]))  # fmt: skip
    for pool in (k_pool, v_pool, k_scale, v_scale):  # the GPU blocks are overwritten meanwhile
        pool.zero_()
    kernels.copy_blocks(cpu[0], cpu[1], k_pool, v_pool, parked, used,
                        src_scales=(cpu[2], cpu[3]), dst_scales=(k_scale, v_scale))  # fmt: skip
    after = kernels.decode_attention(*args, k_scale=k_scale, v_scale=v_scale)
    torch.testing.assert_close(after, before, atol=0, rtol=0)
    assert torch.equal(k_scale, saved[0])
    assert torch.equal(v_scale, saved[1])
    assert saved[0].any()


@pytest.mark.parametrize("kernels", BACKENDS, ids=lambda k: k.name)
def test_misuse_is_refused_with_a_clear_error(kernels) -> None:
    batch = random_paged_batch([20], [1], num_heads=4, num_kv_heads=2, head_dim=32)
    k_pool, v_pool, k_scale, v_scale = _pools(batch, torch.int8)
    args = (batch.q, k_pool, v_pool, batch.block_tables, batch.context_lens, SCALE)
    with pytest.raises(ValueError, match="need k_scale and v_scale"):
        kernels.decode_attention(*args)
    with pytest.raises(ValueError, match="need no scales"):
        kernels.decode_attention(batch.q, batch.k_cache, batch.v_cache, *args[3:], k_scale=k_scale,
                                 v_scale=v_scale)  # fmt: skip
    with pytest.raises(ValueError, match="float32"):
        kernels.decode_attention(*args, k_scale=k_scale.half(), v_scale=v_scale)
    ids = torch.tensor([0]), torch.tensor([1])
    with pytest.raises(ValueError, match="need k_scale and v_scale"):
        kernels.copy_blocks(k_pool, v_pool, k_pool.clone(), v_pool.clone(), *ids)


def _bits(t: torch.Tensor) -> torch.Tensor:
    """One-byte tensors as raw bytes (fp8 has no torch.equal on CPU)."""
    return t.view(torch.uint8) if t.element_size() == 1 else t


def _on(batch: PagedBatch, device: torch.device) -> PagedBatch:
    return PagedBatch(*(t.to(device) for t in dataclasses.astuple(batch)))


@pytest.mark.parametrize("dtype", QDTYPES, ids=str)
@pytest.mark.parametrize("heads", [(4, 1, 64), (8, 2, 64)], ids=str)
def test_the_triton_kernels_attend_to_quantised_pools_as_the_reference_does(
    make_triton: Callable[..., object], kernel_device: torch.device, dtype, heads
) -> None:
    """Triton writes (the torch scale upkeep), then prefill after a cached prefix and decode, with small
    tiles so that a tile spans blocks of different scales: equal to the reference over the same pools."""
    if dtype == torch.float8_e4m3fn and kernel_device.type == "cpu":
        pytest.skip("Triton's interpreter has no fp8 (numpy lacks it); fp8 tiles are checked on CUDA")
    triton_kernels = make_triton(prefill_block_m=16, prefill_block_n=16, decode_block_n=16)
    num_heads, kv_heads, head_dim = heads
    contexts = [37, 50, 20]
    batch = random_paged_batch(contexts, [37 - 16, 50 - 21, 20 - 16], num_heads=num_heads,
                               num_kv_heads=kv_heads, head_dim=head_dim, seed=num_heads)  # fmt: skip
    pools = _pools(batch, dtype)
    _write_contexts(ReferenceKernels(), batch, pools, split=16)
    expected_pools = [p.clone() for p in pools]
    device_pools = [torch.zeros_like(p, device=kernel_device) for p in pools]
    _write_contexts(triton_kernels, _on(batch, kernel_device), device_pools, split=16)
    for written, expected in zip(device_pools, expected_pools, strict=True):  # the same bytes and scales
        assert torch.equal(_bits(written.cpu()), _bits(expected))
    on_device = _on(batch, kernel_device)
    k_pool, v_pool, k_scale, v_scale = device_pools
    out = triton_kernels.prefill_attention(
        on_device.q, k_pool, v_pool, on_device.block_tables, on_device.cu_seqlens_q, on_device.context_lens,
        SCALE, k_scale=k_scale, v_scale=v_scale,
    )  # fmt: skip
    ref = ReferenceKernels().prefill_attention(
        batch.q, *pools[:2], batch.block_tables, batch.cu_seqlens_q, batch.context_lens, SCALE,
        k_scale=pools[2], v_scale=pools[3],
    )  # fmt: skip
    torch.testing.assert_close(out.cpu(), ref, atol=1e-4, rtol=0)
    last = (on_device.cu_seqlens_q[1:] - 1).long()  # each sequence's last query: a decode of it
    out = triton_kernels.decode_attention(
        on_device.q[last], k_pool, v_pool, on_device.block_tables, on_device.context_lens, SCALE,
        k_scale=k_scale, v_scale=v_scale,
    )  # fmt: skip
    torch.testing.assert_close(out.cpu(), ref[last.cpu()], atol=1e-4, rtol=0)


def test_triton_copies_carry_the_scales(
    make_triton: Callable[..., object], kernel_device: torch.device
) -> None:
    triton_kernels = make_triton()
    pools = [torch.randint(-127, 128, (6, 16, 2, 32), dtype=torch.int8, device=kernel_device) for _ in "kv"]
    scales = [torch.rand(6, 2, device=kernel_device) for _ in "kv"]
    dst = [torch.zeros_like(p) for p in (*pools, *scales)]
    src_ids, dst_ids = torch.tensor([0, 4, 5]), torch.tensor([3, 1, 2])
    triton_kernels.copy_blocks(*pools, dst[0], dst[1], src_ids, dst_ids,
                               src_scales=tuple(scales), dst_scales=(dst[2], dst[3]))  # fmt: skip
    for copied, source in zip(dst, (*pools, *scales), strict=True):
        assert torch.equal(copied[dst_ids.to(kernel_device)], source[src_ids.to(kernel_device)])
