"""Shapes and their comparison read exactly as their plain definitions: the window hashes (summed
from one running sum) as each window's sum, and ``order`` (how one prompt's content after a point
appears in another; it looks up only the anchors after that point, by binary search) as every anchor
of both prompts intersected and then filtered, on prompts whose content is kept, moved, rotated, cut
into, extended or replaced."""

from __future__ import annotations

import numpy as np
import pytest

from kvgate.gateway.diagnosis.shape import WINDOW, Order, Shape, Shaper, order, shared_prefix


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
        for n in (WINDOW, WINDOW + 1, 100, 4099):
            keyed = rng.integers(0, 2**63, n, dtype=np.int64).astype(np.uint64) * np.uint64(3)
            with np.errstate(over="ignore"):
                expected = (np.lib.stride_tricks.sliding_window_view(keyed, WINDOW) * powers).sum(
                    axis=1, dtype=np.uint64
                )
                assert np.array_equal(shaper._windows(keyed), expected), (seed, n)
