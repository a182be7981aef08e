"""Who holds which chunk, as holder bitmaps over worker slots: the in-process index's core.

Every worker gets a small integer *slot*; a chunk's holders are one Python int per tier whose bit
``slot`` is set when that worker holds the chunk there. Walking a request's chain is then a few
big-int operations per chunk, however many workers share the prefix: the walk keeps the set of
workers still in the running as one mask and does per-worker work only where a worker's tier
changes or its run ends. Expiry is exact: a heap of deadlines is drained before every answer.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence

from kvgate.index.types import Cohort
from kvgate.proto.ids import ChunkHash, Tier, WorkerId

_GPU, _CPU, _PENDING = 0, 1, 2
_TIER_CODE = {Tier.GPU: _GPU, Tier.CPU: _CPU}
_TIER_CHAR = (Tier.GPU.value, Tier.CPU.value, Tier.PENDING.value)


def _bits(mask: int) -> list[int]:
    """The slots set in ``mask``, lowest first (via the binary string: O(bits) at C speed)."""
    digits = bin(mask)[:1:-1]
    return [i for i, d in enumerate(digits) if d == "1"]


class HolderBitmaps:
    """chunk -> [GPU holders, CPU holders] masks; chunk -> pending mask; per slot, chunk -> expiry.

    Slots are the caller's (see :class:`SlotTable`); a slot's holdings must be cleared before the
    slot is given to another worker. Pending hints are not per-slot-tracked: they only expire.
    Not thread-safe; every method is synchronous.
    """

    def __init__(self) -> None:
        self._tiers: dict[ChunkHash, list[int]] = {}
        self._pending: dict[ChunkHash, int] = {}
        self._pending_until: dict[tuple[ChunkHash, int], int] = {}
        self._held: dict[int, dict[ChunkHash, int]] = {}  # slot -> chunk -> expires_ms * 2 + tier code
        self._deadlines: list[tuple[int, int, ChunkHash]] = []  # (expires_ms, slot or -1-slot pending, chunk)
        self._live_entries = 0

    # -- writes --------------------------------------------------------------------------------

    def hold(self, slot: int, chunk: ChunkHash, tier: Tier, expires_ms: int) -> None:
        """``slot`` holds ``chunk`` in ``tier`` (GPU or CPU) until ``expires_ms`` (replacing any
        earlier holding of it)."""
        code = _TIER_CODE[tier]
        held = self._held.setdefault(slot, {})
        if chunk not in held:
            self._live_entries += 1
        held[chunk] = expires_ms * 2 + code
        masks = self._tiers.get(chunk)
        if masks is None:
            masks = self._tiers[chunk] = [0, 0]
        bit = 1 << slot
        masks[code] |= bit
        masks[1 - code] &= ~bit
        self._schedule(expires_ms, slot, chunk)

    def drop(self, slot: int, chunk: ChunkHash) -> bool:
        """``slot`` no longer holds ``chunk``; False if it did not."""
        held = self._held.get(slot)
        if held is None or held.pop(chunk, None) is None:
            return False
        self._live_entries -= 1
        masks = self._tiers[chunk]
        bit = ~(1 << slot)
        masks[0] &= bit
        masks[1] &= bit
        if not masks[0] | masks[1]:
            del self._tiers[chunk]
        return True

    def clear(self, slot: int) -> int:
        """Drops everything ``slot`` holds; returns how many chunks."""
        held = self._held.pop(slot, {})
        bit = ~(1 << slot)
        for chunk in held:
            masks = self._tiers[chunk]
            masks[0] &= bit
            masks[1] &= bit
            if not masks[0] | masks[1]:
                del self._tiers[chunk]
        self._live_entries -= len(held)
        return len(held)

    def add_pending(self, slot: int, chunks: Sequence[ChunkHash], expires_ms: int) -> None:
        """A request with ``chunks`` was just routed to ``slot``: each counts as PENDING there
        until ``expires_ms`` (or a later deadline it already had) unless the slot holds it."""
        bit = 1 << slot
        for chunk in chunks:
            if self._pending_until.get((chunk, slot), -1) >= expires_ms:
                continue
            self._pending[chunk] = self._pending.get(chunk, 0) | bit
            self._pending_until[(chunk, slot)] = expires_ms
            self._schedule(expires_ms, -1 - slot, chunk)

    def held_by(self, slot: int) -> int:
        """How many chunks ``slot`` holds."""
        return len(self._held.get(slot, ()))

    # -- expiry ----------------------------------------------------------------------------------

    def expire(self, now_ms: int) -> None:
        """Drops every holding and pending hint whose deadline is at or before ``now_ms``."""
        deadlines = self._deadlines
        while deadlines and deadlines[0][0] <= now_ms:
            expires, slot, chunk = heapq.heappop(deadlines)
            if slot >= 0:
                value = self._held.get(slot, {}).get(chunk)
                if value is not None and value >> 1 == expires:
                    self.drop(slot, chunk)
            elif self._pending_until.get((chunk, -1 - slot)) == expires:
                self._drop_pending(chunk, -1 - slot)

    def _drop_pending(self, chunk: ChunkHash, slot: int) -> None:
        del self._pending_until[(chunk, slot)]
        mask = self._pending[chunk] & ~(1 << slot)
        if mask:
            self._pending[chunk] = mask
        else:
            del self._pending[chunk]

    def _schedule(self, expires_ms: int, key: int, chunk: ChunkHash) -> None:
        """Pushes a deadline; rebuilds the heap from what is live once stale deadlines (refreshed
        or dropped entries) outnumber live ones, so memory follows what is held (amortised O(1))."""
        heapq.heappush(self._deadlines, (expires_ms, key, chunk))
        live = self._live_entries + len(self._pending_until)
        if len(self._deadlines) > 2 * live + 1024:
            self._deadlines = [(v >> 1, s, c) for s, held in self._held.items() for c, v in held.items()]
            self._deadlines += [(t, -1 - s, c) for (c, s), t in self._pending_until.items()]
            heapq.heapify(self._deadlines)

    # -- reads -----------------------------------------------------------------------------------

    def walk(self, hashes: Sequence[ChunkHash], live: int, names: Sequence[WorkerId]) -> tuple[Cohort, ...]:
        """Per slot in ``live`` (a mask), the tiers of the leading chunks of ``hashes`` it holds
        (a holding beats a pending hint), as cohorts of workers named by ``names[slot]``. Call
        :meth:`expire` first.

        Workers whose tiers have agreed so far form one *cohort* (a mask and its runs); each step
        splits cohorts by tier and retires the part that holds nothing more. Cost: O(chunks x
        cohorts) mask operations plus O(workers matched) to name the results."""
        cohorts: list[tuple[int, tuple[tuple[int, int], ...]]] = [(live, ())]
        done: list[tuple[int, tuple[tuple[int, int], ...], int]] = []
        for i, chunk in enumerate(hashes):
            masks = self._tiers.get(chunk)
            g, c = (masks[0], masks[1] & ~masks[0]) if masks else (0, 0)
            p = self._pending.get(chunk, 0) & ~(g | c)
            cohorts, ended = _split(cohorts, (g, c, p), i)
            done += ended
            if not cohorts:
                break
        else:
            done += [(mask, runs, len(hashes)) for mask, runs in cohorts]
        return tuple(
            Cohort(_tiers(runs, end), tuple(names[slot] for slot in _bits(mask)))
            for mask, runs, end in done
            if runs
        )

    @property
    def chunks(self) -> int:
        """Chunks held by any worker (pending hints not counted)."""
        return len(self._tiers)


def _split(cohorts: list, tiers: tuple[int, int, int], i: int) -> tuple[list, list]:
    """Each cohort split by the tier its members hold chunk ``i`` in; the rest end before ``i``."""
    kept, ended = [], []
    for mask, runs in cohorts:
        rest = mask
        for code, held in enumerate(tiers):
            part = mask & held
            if part:
                rest &= ~part
                same = runs and runs[-1][1] == code
                kept.append((part, runs if same else (*runs, (i, code))))
        if rest:
            ended.append((rest, runs, i))
    return kept, ended


def _tiers(run: tuple[tuple[int, int], ...], end: int) -> str:
    bounds = [start for start, _ in run[1:]] + [end]
    return "".join(_TIER_CHAR[code] * (stop - start) for (start, code), stop in zip(run, bounds, strict=True))
