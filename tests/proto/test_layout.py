"""The cache layout's rules, each defined once: sizes, reusable tokens, salt -> root, TTL classes and
the KV geometry."""

from __future__ import annotations

import pytest

from kvgate.proto.chain import ChainRoots, chain_hashes
from kvgate.proto.hashing import HashRoot
from kvgate.proto.layout import (
    DEFAULT_BLOCK_SIZE,
    DEFAULT_CHUNK_SIZE,
    DEFAULT_TTL_S,
    TTL_CLASSES,
    CacheLayout,
    KVGeometry,
    reusable_tokens,
)

LAYOUT = CacheLayout("m", secret=b"s")


def test_defaults_are_the_documented_ones() -> None:
    assert (DEFAULT_CHUNK_SIZE, DEFAULT_BLOCK_SIZE, DEFAULT_TTL_S) == (128, 16, 300.0)
    assert TTL_CLASSES == {"5m": 300, "1h": 3600}
    assert (LAYOUT.chunk_size, LAYOUT.block_size) == (128, 16)


@pytest.mark.parametrize(
    ("prompt", "reusable"), [(0, 0), (1, 0), (16, 0), (17, 16), (32, 16), (33, 32), (1000, 992)]
)
def test_whole_blocks_before_the_last_prompt_token_are_reusable(prompt: int, reusable: int) -> None:
    assert reusable_tokens(prompt, 16) == reusable


def test_a_shared_part_covers_whole_chunks() -> None:
    assert (LAYOUT.whole_chunks(127), LAYOUT.whole_chunks(300)) == (0, 256)


def test_salt_to_root_with_and_without_a_shared_namespace() -> None:
    private = HashRoot(b"s", "m", "", "tenant").digest()
    assert LAYOUT.roots("tenant") == ChainRoots(private)
    shared = LAYOUT.roots("tenant", "docs", 256)
    assert shared == ChainRoots(private, HashRoot(b"s", "m", "", "docs").digest(), 256)
    ids = list(range(600))
    assert chain_hashes(ids, shared, 128)[:2] == chain_hashes(ids[:256], LAYOUT.roots("docs"), 128)
    with pytest.raises(ValueError, match="multiple of 128"):
        LAYOUT.roots("tenant", "docs", 100)


def test_kv_geometry_counts_k_and_v_of_every_layer() -> None:
    kv = KVGeometry(num_layers=30, num_kv_heads=3, head_dim=64, dtype="bfloat16")
    assert kv.bytes_per_token == 2 * 30 * 3 * 64 * 2
    assert kv.block_shape(16) == (16, 3, 64)
    with_kv = LAYOUT.with_kv(kv)
    assert with_kv.kv == kv
    assert with_kv.fingerprint() == LAYOUT.fingerprint()  # geometry does not change hashes
    assert KVGeometry(1, 1, 1, "int8").element_bytes == 1  # a quantised storage type (its scales apart)
    with pytest.raises(ValueError, match="KV storage dtype"):
        KVGeometry(1, 1, 1, "float64")  # not a KV dtype the engine runs
    with pytest.raises(ValueError, match="positive"):
        KVGeometry(0, 1, 1)


def test_invalid_layouts_are_refused() -> None:
    with pytest.raises(ValueError, match="multiple of block_size"):
        CacheLayout("m", chunk_size=100, block_size=16)
    with pytest.raises(ValueError, match="model_id"):
        CacheLayout("")
