"""Shapes and their comparison read exactly as their plain definitions: the window hashes (summed
from one running sum) as each window's sum, ``order`` (how one prompt's content after a point
appears in another; it looks up only the anchors after that point, by binary search) as every anchor
of both prompts intersected and then filtered, and the shared prefix (whose chunks two hash chains
share are not compared again) as the first token where the prompts differ, on prompts whose content
is kept, moved, rotated, cut into, extended or replaced."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from kvgate.gateway.diagnosis.compare import compare, shared_chunks
from kvgate.gateway.diagnosis.record import Scope
from kvgate.gateway.diagnosis.shape import (
    ANCHOR_EVERY,
    WINDOW,
    Order,
    Shape,
    Shaper,
    order,
    shared_prefix,
)
from tests.gateway.diagnosis.records import CHUNK, SCOPE, chain, record


def _by_definition(a: Shape, b: Shape, after: int) -> Order:
    """Every common anchor, those of ``a`` from ``after`` on kept, stepped through in ``a``'s order."""
    _, ia, ib = np.intersect1d(a.anchors, b.anchors, assume_unique=True, return_indices=True)
    keep = a.anchor_pos[ia] >= after
    in_a, in_b = a.anchor_pos[ia][keep], b.anchor_pos[ib][keep]
    steps = np.diff(in_b[np.argsort(in_a, kind="stable")].astype(np.int64))
    return Order(int((a.anchor_pos >= after).sum()), int(keep.sum()), int((steps < -WINDOW).sum()))


def _variant(tokens: np.ndarray, kind: int, rng: np.random.Generator) -> np.ndarray:
    if kind == 0:  # the same content shuffled
        return rng.permutation(tokens)
    if kind == 1 and len(tokens) > 2 * WINDOW:  # rotated: the tail moved to the front
        cut = int(rng.integers(1, len(tokens) - 1))
        return np.concatenate([tokens[cut:], tokens[:cut]])
    if kind == 2:  # new content cut into the middle
        middle, new = len(tokens) // 2, rng.integers(0, 50_000, int(rng.integers(0, 300)))
        return np.concatenate([tokens[:middle], new, tokens[middle:]])
    if kind == 3:  # a follow-up: the same prompt and a short new message
        return np.concatenate([tokens, rng.integers(0, 50_000, 24)])
    return rng.integers(0, 50_000, len(tokens))  # other content of the same length


@pytest.mark.parametrize("vocabulary", [300, 50_000])  # a small one repeats windows: duplicate anchors
def test_order_reads_as_its_definition(vocabulary: int) -> None:
    rng = np.random.default_rng(vocabulary)
    shaper = Shaper(seed=7)
    reordered = 0
    for case in range(400):
        tokens = rng.integers(0, vocabulary, int(rng.integers(0, 3000)))
        a, b = shaper.shape(tokens), shaper.shape(_variant(tokens, case % 5, rng))
        for after in (0, shared_prefix(a, b), int(rng.integers(0, len(tokens) + 2)), len(tokens)):
            for x, y in ((a, b), (b, a)):
                got = order(x, y, after)
                assert got == _by_definition(x, y, after), (case, after)
                assert {type(v) for v in (got.anchors, got.found, got.backwards)} == {int}  # JSON
                reordered += got.moved
    assert reordered > 0  # the cases exercise moved content, not only content kept in place


def test_window_hashes_read_as_their_definition() -> None:
    """The running-sum window hashes equal the sum over each window of token x mix^(WINDOW - 1 - j),
    modulo 2^64, bit for bit (shapes, and so every comparison, are unchanged by how it is summed)."""
    rng = np.random.default_rng(5)
    for seed in range(20):
        shaper = Shaper(seed=seed)
        mix = np.uint64(shaper._mix)
        powers = np.array([pow(int(mix), WINDOW - 1 - j, 2**64) for j in range(WINDOW)], dtype=np.uint64)
        for n in (WINDOW, WINDOW + 1, 100, 4099, 1500, 9000):  # the table of powers grown, read, regrown
            keyed = rng.integers(0, 2**63, n, dtype=np.int64).astype(np.uint64) * np.uint64(3)
            with np.errstate(over="ignore"):
                expected = (np.lib.stride_tricks.sliding_window_view(keyed, WINDOW) * powers).sum(
                    axis=1, dtype=np.uint64
                )
                assert np.array_equal(shaper._windows(keyed), expected), (seed, n)


def test_anchors_are_the_windows_picked_by_their_hash() -> None:
    """Each distinct mixed window hash divisible by ANCHOR_EVERY, at its first window, sorted."""
    rng = np.random.default_rng(9)
    shaper = Shaper(seed=4)
    for n in (0, WINDOW - 1, WINDOW, 700, 20_000):
        ids = rng.integers(0, 400, n)  # a small vocabulary: repeated windows
        shape = shaper.shape(ids)
        keyed = ids.astype(np.uint64) * shaper._mul + shaper._add
        expected: dict[int, int] = {}
        if n >= WINDOW:
            with np.errstate(over="ignore"):
                windows = shaper._windows(keyed)
                windows ^= windows >> np.uint64(29)
                windows *= shaper._mul
            for position, value in enumerate(windows.tolist()):
                if value % ANCHOR_EVERY == 0:
                    expected.setdefault(value, position)
        assert shape.anchors.tolist() == sorted(expected), n
        assert shape.anchor_pos.tolist() == [expected[v] for v in sorted(expected)], n


def _first_difference(a: np.ndarray, b: np.ndarray) -> int:
    n = min(len(a), len(b))
    differ = np.flatnonzero(a[:n] != b[:n])
    return int(differ[0]) if differ.size else n


@pytest.mark.parametrize("vocabulary", [300, 50_000])
def test_the_shared_prefix_and_the_shared_chunks_read_as_their_definitions(vocabulary: int) -> None:
    rng = np.random.default_rng(vocabulary + 1)
    shaper = Shaper(seed=3)
    for case in range(600):
        tokens = rng.integers(0, vocabulary, int(rng.integers(0, 2000)))
        other = _variant(tokens, case % 5, rng)
        if case % 7 == 0:  # a copy cut short, or extended
            other = tokens[: int(rng.integers(0, len(tokens) + 1))]
        true = _first_difference(tokens, other)  # marks differ wherever tokens do, but 1 in 65,536
        a, b = shaper.shape(tokens), shaper.shape(other)
        chunks = shared_chunks(chain(tokens), chain(other))
        assert chunks == min(true // CHUNK, len(tokens) // CHUNK, len(other) // CHUNK), case
        assert shared_chunks(chain(other), chain(tokens)) == chunks
        for known in (0, chunks * CHUNK, int(rng.integers(0, true + 1))):
            assert shared_prefix(a, b, known) == shared_prefix(a, b) >= true, (case, known)


def test_chains_change_no_comparison() -> None:
    """A request compared with records holding their chains finds what it finds without them."""
    rng = np.random.default_rng(11)
    other_scope = Scope("tiny", adapter="sql", salt=SCOPE.salt)
    skipped = 0
    for case in range(150):
        base = rng.integers(0, 50_000, int(rng.integers(100, 1500)))
        earlier = [
            record(f"r{i}", _variant(base, int(rng.integers(0, 6)), rng) if i % 3 else base[: 128 * i],
                   scope=other_scope if i % 4 == 3 else SCOPE)
            for i in range(8)
        ]  # fmt: skip
        current = record("now", np.concatenate([base, rng.integers(0, 50_000, 30)]))
        with_chains = compare(current, earlier, CHUNK)
        plain = [replace(r, chunk_hashes=b"") for r in earlier]
        assert with_chains == compare(replace(current, chunk_hashes=b""), plain, CHUNK), case
        skipped += sum(shared_chunks(current.chunk_hashes, r.chunk_hashes) for r in earlier)
    assert skipped > 1000  # most comparisons had shared chunks to skip
