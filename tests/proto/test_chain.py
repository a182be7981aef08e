"""The scoped hash chain: a shared prefix under one root, the rest rebased onto the request's own."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from kvgate.proto.chain import ChainRoots, chain_hashes, rebase
from kvgate.proto.hashing import chunk_hashes
from kvgate.workers.kv.prompt import Prompt

MINE, OTHER, SHARED = b"m" * 16, b"o" * 16, b"s" * 16


def ids(n: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 50_000, n).astype(np.uint32)


def test_without_a_shared_part_the_chain_is_the_plain_one() -> None:
    tokens = ids(1000)
    assert chain_hashes(tokens, ChainRoots(MINE), 128) == chunk_hashes(tokens, MINE, 128)
    assert chain_hashes(tokens, ChainRoots(MINE, SHARED, 0), 16) == chunk_hashes(tokens, MINE, 16)


def test_the_shared_part_is_common_and_the_rest_is_private() -> None:
    tokens = ids(1000)
    mine, other = ChainRoots(MINE, SHARED, 256), ChainRoots(OTHER, SHARED, 256)
    a, b = chain_hashes(tokens, mine, 128), chain_hashes(tokens, other, 128)
    assert a[:2] == b[:2] == chunk_hashes(tokens[:256], SHARED, 128)
    assert not set(a[2:]) & set(b[2:])  # identical tokens after it, nothing in common
    assert a[2:] == chunk_hashes(tokens[256:], rebase(MINE, a[1]), 128)
    assert not set(a[2:]) & set(chunk_hashes(tokens, MINE, 128))  # nor with the unshared chain


@given(st.integers(0, 900), st.sampled_from([0, 128, 256, 512]), st.sampled_from([16, 128]))
def test_hashing_in_pieces_equals_hashing_at_once(cut: int, shared: int, size: int) -> None:
    tokens = ids(1000, seed=cut)
    roots = ChainRoots(MINE, SHARED if shared else None, shared)
    whole = chain_hashes(tokens, roots, size)
    head = chain_hashes(tokens[: cut // size * size], roots, size)
    tail = chain_hashes(tokens[len(head) * size :], roots, size, len(head), head[-1] if head else None)
    assert head + tail == whole


def test_the_worker_prompt_and_the_gateway_agree() -> None:
    tokens, roots = ids(700), ChainRoots(MINE, SHARED, 384)
    prompt = Prompt.build(tokens, roots, block_size=16, chunk_size=128)
    assert list(prompt.chunk_hashes) == chain_hashes(tokens, roots, 128)
    assert list(prompt.block_hashes) == chain_hashes(tokens, roots, 16)
    assert prompt.block_key(24, 16).parent == rebase(MINE, prompt.block_hashes[23])  # block 24: token 384


def test_bad_roots_are_refused() -> None:
    with pytest.raises(ValueError, match="shared root"):
        ChainRoots(MINE, None, 128)
    with pytest.raises(ValueError, match="multiple of 128"):
        ChainRoots(MINE, SHARED, 100).check(128)
    with pytest.raises(ValueError, match="multiple of the unit"):  # else the suffix would never rebase
        chain_hashes(ids(300), ChainRoots(MINE, SHARED, 100), 64)
