"""Per-layer KV pools: the kernels' layout, one pair per layer, and their size per block."""

from __future__ import annotations

import torch

from kvgate.kernels import cache_geometry
from kvgate.workers.model import ModelConfig, allocate_kv_caches, kv_cache_bytes_per_block

CONFIG = ModelConfig(
    vocab_size=10, hidden_size=32, intermediate_size=64, num_layers=3, num_heads=4, num_kv_heads=2,
    head_dim=8, rms_norm_eps=1e-5, rope_theta=1e4, max_position_embeddings=64,
)  # fmt: skip


def test_pools_have_the_kernel_layout_one_pair_per_layer() -> None:
    caches = allocate_kv_caches(CONFIG.kv_geometry("bfloat16"), num_blocks=5, block_size=16, device="cpu")
    assert len(caches) == 3
    for cache in caches:
        assert tuple(cache_geometry(cache.k, cache.v)) == (5, 16, 2, 8)
        assert cache.k.dtype == torch.bfloat16
        assert not cache.k.any()
    assert len({c.k.data_ptr() for c in caches} | {c.v.data_ptr() for c in caches}) == 6  # no sharing


def test_bytes_per_block_counts_k_and_v_of_every_layer() -> None:
    kv = CONFIG.kv_geometry("float16")
    assert kv_cache_bytes_per_block(kv, 16) == 2 * 16 * 2 * 8 * 3 * 2
    caches = allocate_kv_caches(kv, num_blocks=1, block_size=16, device="cpu")
    assert sum(c.k.nbytes + c.v.nbytes for c in caches) == kv_cache_bytes_per_block(kv, 16)
