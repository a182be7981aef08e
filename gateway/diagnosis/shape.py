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

WINDOW = 16
ANCHOR_EVERY = 8  # about one window in 8 is an anchor (a power of two: picked by a mask)
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
    """Owned by the diagnosis record; one random key per process. Thread-safe: its only state after
    init is a table of the key's powers, grown (replaced whole, never written in place) to the
    longest prompt shaped so far, 16 bytes per token of it."""

    def __init__(self, seed: int | None = None) -> None:
        rng = np.random.default_rng(secrets.randbits(64) if seed is None else seed)
        keys = rng.integers(0, 2**63, 3, dtype=np.int64)
        self._mul, self._add, self._mix = (_U64(int(x) | 1) for x in keys)
        self._unmix = _U64(pow(int(self._mix), -1, 2**64))  # odd: invertible modulo 2^64
        self._powers = (np.ones(0, _U64), np.ones(0, _U64))  # mix^k, mix^-k for k < their length

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
        windows = self._windows(keyed)
        windows ^= windows >> _U64(29)
        windows *= self._mul
        picked = np.flatnonzero(windows & _U64(ANCHOR_EVERY - 1) == 0)[:MAX_ANCHORS]  # == w % EVERY
        anchors, first = np.unique(windows[picked], return_index=True)
        return anchors, picked[first].astype(np.int32)

    def _windows(self, keyed: np.ndarray) -> np.ndarray:
        """The hash of every ``WINDOW``-token window, sum over j of keyed[i + j] x mix^(WINDOW - 1 - j)
        modulo 2^64, from one running sum: with S[i] the sum of keyed[k] x mix^-k over k < i, window
        i is mix^(i + WINDOW - 1) x (S[i + WINDOW] - S[i]). O(n), not O(n x WINDOW)."""
        n = len(keyed)
        mix, unmix = self._powers_to(n)
        running = np.zeros(n + 1, dtype=_U64)
        np.cumsum(keyed * unmix, out=running[1:])
        return mix[WINDOW - 1 :] * (running[WINDOW:] - running[: n - WINDOW + 1])

    def _powers_to(self, n: int) -> tuple[np.ndarray, np.ndarray]:
        """mix^k and mix^-k for k < n (read-only views of the table, grown to at least n first)."""
        mix, unmix = self._powers
        if len(mix) < n:
            size = max(n, 2 * len(mix), 1024)
            mix, unmix = np.full(size, self._mix, dtype=_U64), np.full(size, self._unmix, dtype=_U64)
            mix[0] = unmix[0] = 1
            np.cumprod(mix, out=mix)
            np.cumprod(unmix, out=unmix)
            mix.flags.writeable = unmix.flags.writeable = False
            self._powers = (mix, unmix)  # one assignment: a thread reading the old table keeps it
        return mix[:n], unmix[:n]


def shared_prefix(a: Shape, b: Shape, known: int = 0) -> int:
    """Leading tokens ``a`` and ``b`` have in common (by their marks); the first ``known`` tokens are
    known to be equal (``known`` at most the shorter length) and are not compared again."""
    n = min(len(a.marks), len(b.marks))
    if known >= n:
        return n
    differ = a.marks[known:n] != b.marks[known:n]
    first = int(differ.argmax())  # the first True (0 when there is none)
    return known + first if differ[first] else n


def order(a: Shape, b: Shape, after: int) -> Order:
    """How ``a``'s content from token ``after`` on appears in ``b`` (see :class:`Order`). Looks up only
    ``a``'s anchors from ``after`` on, by binary search in ``b``'s sorted anchors (one vectorized pass
    over ``a``'s anchor positions, then O(k log m) for k such anchors): a follow-up that adds a short
    message to a long shared prompt costs little."""
    (mine,) = (a.anchor_pos >= after).nonzero()  # ascending: a's anchors (sorted) from `after` on
    if not mine.size:
        return Order(0, 0, 0)
    if not b.anchors.size:
        return Order(int(mine.size), 0, 0)
    values = a.anchors[mine]
    at = b.anchors.searchsorted(values)
    np.minimum(at, b.anchors.size - 1, out=at)  # past the end: the last anchor, smaller, so not found
    found = b.anchors[at] == values
    common = int(np.count_nonzero(found))
    if common < 2:  # no step between found anchors
        return Order(int(mine.size), common, 0)
    in_a, in_b = a.anchor_pos[mine[found]], b.anchor_pos[at[found]]
    steps = np.diff(in_b[np.argsort(in_a, kind="stable")].astype(np.int64))
    return Order(int(mine.size), common, int((steps < -WINDOW).sum()))
