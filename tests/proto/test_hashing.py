"""The chunk-hash contract: golden vectors pin the byte layout; properties pin the semantics."""

from __future__ import annotations

import struct
import subprocess
import sys

import numpy as np
import pytest
import xxhash
from hypothesis import given
from hypothesis import strategies as st

from kvgate.proto.hashing import HashRoot, as_token_array, chunk_hashes
from kvgate.proto.layout import DEFAULT_CHUNK_SIZE

SMOLLM = "HuggingFaceTB/SmolLM2-135M-Instruct"
ROOT = HashRoot(b"kvgate-golden", SMOLLM).digest()
token_lists = st.lists(st.integers(0, 2**32 - 1), max_size=600)


def test_golden_vectors() -> None:
    """If this fails, deployed gateways and workers would stop agreeing: never update casually."""
    assert ROOT.hex() == "7e6de6351805b32ef7b5bc65dd169abf"
    assert [h.hex() for h in chunk_hashes(list(range(300)), ROOT, DEFAULT_CHUNK_SIZE)] == [
        "d6330cb8135d17de66fa139b988d9660",
        "0238afc837d5b4d4512d35f18999da01",
    ]
    tenant = HashRoot(b"kvgate-golden", SMOLLM, adapter_id="lora-a", cache_salt="tenant-1").digest()
    assert tenant.hex() == "f2dc9d84538caadb0ba070f1f6e4b609"
    assert [h.hex() for h in chunk_hashes([2**32 - 1, 0, 7, 123456] * 8, tenant, chunk_size=16)] == [
        "f0f7a63b65bfff3d1dfecf68435d5ad0",
        "9bcf628c9895d9263c119ab25945db81",
    ]


def test_layout_matches_the_documented_formula() -> None:
    """An independent implementation of the docstring's layout, with struct and one-shot XXH3."""
    fields = [b"kvgate-golden", SMOLLM.encode(), b"", b""]
    root = xxhash.xxh3_128_digest(
        b"kvgate/chunk/v1" + b"".join(struct.pack("<I", len(f)) + f for f in fields)
    )
    ids = list(range(1000, 1000 + 256))
    h0 = xxhash.xxh3_128_digest(root + struct.pack("<128I", *ids[:128]))
    h1 = xxhash.xxh3_128_digest(h0 + struct.pack("<128I", *ids[128:]))
    assert chunk_hashes(ids, ROOT, DEFAULT_CHUNK_SIZE) == [h0, h1]
    assert root == ROOT


@given(token_lists, st.integers(0, 600), st.sampled_from([16, 32, 128]))
def test_hashes_of_a_prefix_are_a_prefix_of_the_hashes(ids: list[int], cut: int, size: int) -> None:
    full = chunk_hashes(ids, ROOT, size)
    assert len(full) == len(ids) // size
    assert chunk_hashes(ids[:cut], ROOT, size) == full[: min(cut, len(ids)) // size]


@given(st.lists(st.integers(0, 2**32 - 1), min_size=64, max_size=200), st.data())
def test_changing_a_token_changes_its_chunk_and_every_later_one(ids: list[int], data: st.DataObject) -> None:
    size = 16
    position = data.draw(st.integers(0, len(ids) // size * size - 1))
    changed = list(ids)
    changed[position] = (changed[position] + data.draw(st.integers(1, 2**32 - 1))) % 2**32
    before, after = chunk_hashes(ids, ROOT, size), chunk_hashes(changed, ROOT, size)
    k = position // size
    assert before[:k] == after[:k]
    assert all(x != y for x, y in zip(before[k:], after[k:], strict=True))


@pytest.mark.parametrize(
    "other",
    [
        HashRoot(b"kvgate-golden", "another-model"),
        HashRoot(b"another-secret", SMOLLM),
        HashRoot(b"kvgate-golden", SMOLLM, adapter_id="lora-a"),
        HashRoot(b"kvgate-golden", SMOLLM, cache_salt="tenant-2"),
        HashRoot(b"kvgate-golde", "n" + SMOLLM),  # fields are length-prefixed: no ambiguity
    ],
)
def test_different_roots_share_no_chunk(other: HashRoot) -> None:
    ids = list(range(1024))
    mine = chunk_hashes(ids, ROOT, DEFAULT_CHUNK_SIZE)
    theirs = chunk_hashes(ids, other.digest(), DEFAULT_CHUNK_SIZE)
    assert other.digest() != ROOT
    assert not set(mine) & set(theirs)


def test_input_types_agree() -> None:
    ids = list(range(70_000, 70_000 + 512))
    expected = chunk_hashes(ids, ROOT, DEFAULT_CHUNK_SIZE)
    for array in (np.array(ids, dtype=np.int64), np.array(ids, dtype="<u4"), np.array(ids, dtype=">u4")):
        assert chunk_hashes(array, ROOT, DEFAULT_CHUNK_SIZE) == expected
    assert chunk_hashes(tuple(ids), ROOT, DEFAULT_CHUNK_SIZE) == expected


def test_a_uint32_array_is_not_copied() -> None:
    array = np.arange(256, dtype="<u4")
    assert as_token_array(array) is array


@pytest.mark.parametrize(
    "bad", [[-1], [2**32], np.array([-5], dtype=np.int64), [1.5], np.zeros((2, 128), dtype=np.uint32)]
)
def test_invalid_token_ids_are_rejected(bad: object) -> None:
    with pytest.raises(ValueError, match="token ids"):
        chunk_hashes(bad, ROOT, DEFAULT_CHUNK_SIZE)  # type: ignore[arg-type]


def test_chunk_size_must_be_positive() -> None:
    with pytest.raises(ValueError, match="chunk_size"):
        chunk_hashes([1, 2, 3], ROOT, 0)


def test_partial_chunks_are_not_hashed() -> None:
    assert chunk_hashes(list(range(127)), ROOT, DEFAULT_CHUNK_SIZE) == []
    assert len(chunk_hashes(list(range(255)), ROOT, DEFAULT_CHUNK_SIZE)) == 1


def test_identical_across_processes() -> None:
    """No per-process randomness (e.g. Python's salted hash()) may leak into the digests."""
    code = (
        "from kvgate.proto.hashing import HashRoot, chunk_hashes;"
        "root = HashRoot(b's', 'm', 'a', 't').digest();"
        "print(','.join(h.hex() for h in chunk_hashes(list(range(512)), root, 128)))"
    )
    outputs = {
        subprocess.run(
            [sys.executable, "-c", code],
            env={"PYTHONHASHSEED": seed},
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        for seed in ("0", "1", "12345")
    }
    root = HashRoot(b"s", "m", "a", "t").digest()
    here = ",".join(h.hex() for h in chunk_hashes(list(range(512)), root, DEFAULT_CHUNK_SIZE))
    assert outputs == {here + "\n"}
