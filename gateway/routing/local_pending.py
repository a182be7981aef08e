"""This gateway's own recent routing decisions, consulted with no await in between.

Concurrent requests of one burst all look the index up before any of them has written its
pending entry; the decisions themselves are synchronous, so a process-local record made at
decision time keeps the burst together within one gateway (the index's pending entries do the same
across gateways, a round trip later).
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable, Sequence

from kvgate.index.types import LookupResult
from kvgate.proto.ids import ChunkHash, Tier, WorkerId


class LocalPending:
    """chunk hash -> (worker, deadline) of the latest decision, for ``ttl_s`` seconds."""

    def __init__(self, ttl_s: float, monotonic: Callable[[], float] = time.monotonic) -> None:
        self._ttl_s = ttl_s
        self._now = monotonic
        self._entries: OrderedDict[ChunkHash, tuple[WorkerId, float]] = OrderedDict()

    def record(self, hashes: Sequence[ChunkHash], worker_id: WorkerId) -> None:
        """Remembers that ``hashes`` were just routed to ``worker_id``; drops expired entries."""
        now = self._now()
        deadline = now + self._ttl_s
        for h in hashes:
            self._entries[h] = (worker_id, deadline)
            self._entries.move_to_end(h)
        while self._entries and next(iter(self._entries.values()))[1] <= now:
            self._entries.popitem(last=False)

    def merge(self, lookup: LookupResult, hashes: Sequence[ChunkHash]) -> LookupResult:
        """``lookup`` with each worker's run extended by its local pending chunks (as PENDING)."""
        now = self._now()
        runs: dict[WorkerId, int] = {}
        for i, h in enumerate(hashes):
            entry = self._entries.get(h)
            if entry is None or entry[1] <= now or runs.get(entry[0], 0) != i:
                break  # a chain's decisions are one worker's; the first gap ends every local run
            runs[entry[0]] = i + 1
        longer: dict[WorkerId, str] = {}
        for worker, length in runs.items():
            match = lookup.match_for(worker)
            known = match.tiers if match is not None else ""
            if length > len(known):
                longer[worker] = known + Tier.PENDING.value * (length - len(known))
        return lookup.with_runs(longer)

    def __len__(self) -> int:
        return len(self._entries)
