"""A prompt's shape: enough to tell where two prompts part and whether their content moved, nothing
to read the text back from.

- ``marks``: one keyed 16-bit fingerprint per token (a process-local random key), so the first token
  where two prompts differ is found exactly, but for a 1 in 65,536 chance per token of a later one.
- anchors: keyed hashes of ``WINDOW``-token windows at content-defined positions (about one window in
  ``1 / ANCHOR_RATE``), each with its first position. Content that moved (swapped documents) keeps its
  anchors and changes their order; content edited in place keeps both.

A shape costs about 3 bytes per token. Shapes made by different :class:`Shaper` s do not compare.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

WINDOW = 16
ANCHOR_EVERY = 8  # about one window in 8 is an anchor
MAX_ANCHORS = 8192
_U64 = np.uint64


@dataclass(frozen=True, slots=True)
class Shape:
    """``marks``: uint16 per token; ``anchors``: sorted unique uint64 window hashes; ``anchor_pos``:
    int32, the first token of each anchor's first window (same order as ``anchors``)."""

    marks: np.ndarray
    anchors: np.ndarray
    anchor_pos: np.ndarray

    @property
    def nbytes(self) -> int:
        return self.marks.nbytes + self.anchors.nbytes + self.anchor_pos.nbytes


@dataclass(frozen=True, slots=True)
class Order:
    """How the content of one prompt after token ``after`` appears in another: ``anchors`` of it,
    ``found`` in the other, ``backwards`` steps (a found anchor earlier in the other than the one
    before it, by more than a window: moved content)."""

    anchors: int
    found: int
    backwards: int

    @property
    def reappears(self) -> bool:
        """Most of the content reappears in the other prompt."""
        return self.anchors > 0 and self.found * 2 >= self.anchors

    @property
    def moved(self) -> bool:
        return self.reappears and self.backwards > 0


class Shaper:
    """Owned by the diagnosis record; one random key per process (thread-safe, stateless after init)."""

    def __init__(self, seed: int | None = None) -> None:
        rng = np.random.default_rng(secrets.randbits(64) if seed is None else seed)
        keys = rng.integers(0, 2**63, 3, dtype=np.int64)
        self._mul, self._add, self._mix = (_U64(int(x) | 1) for x in keys)
        self._powers = (self._mix ** np.arange(WINDOW - 1, -1, -1, dtype=_U64)).astype(_U64)

    def shape(self, token_ids: np.ndarray) -> Shape:
        """The shape of ``token_ids`` (pure for one shaper)."""
        with np.errstate(over="ignore"):
            keyed = np.asarray(token_ids, dtype=_U64) * self._mul + self._add
            marks = (keyed >> _U64(48)).astype(np.uint16)
            anchors, positions = self._anchors(keyed)
        return Shape(marks, anchors, positions)

    def _anchors(self, keyed: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        if len(keyed) < WINDOW:
            return np.zeros(0, _U64), np.zeros(0, np.int32)
        windows = (sliding_window_view(keyed, WINDOW) * self._powers).sum(axis=1, dtype=_U64)
        windows ^= windows >> _U64(29)
        windows *= self._mul
        picked = np.flatnonzero(windows % _U64(ANCHOR_EVERY) == 0)[:MAX_ANCHORS]
        anchors, first = np.unique(windows[picked], return_index=True)
        return anchors, picked[first].astype(np.int32)


def shared_prefix(a: Shape, b: Shape) -> int:
    """Leading tokens ``a`` and ``b`` have in common (by their marks)."""
    n = min(len(a.marks), len(b.marks))
    differ = np.flatnonzero(a.marks[:n] != b.marks[:n])
    return int(differ[0]) if differ.size else n


def order(a: Shape, b: Shape, after: int) -> Order:
    """How ``a``'s content from token ``after`` on appears in ``b`` (see :class:`Order`)."""
    mine = a.anchor_pos >= after
    _, ia, ib = np.intersect1d(a.anchors, b.anchors, assume_unique=True, return_indices=True)
    keep = a.anchor_pos[ia] >= after
    in_a, in_b = a.anchor_pos[ia][keep], b.anchor_pos[ib][keep]
    steps = np.diff(in_b[np.argsort(in_a, kind="stable")].astype(np.int64))
    return Order(int(mine.sum()), int(keep.sum()), int((steps < -WINDOW).sum()))
