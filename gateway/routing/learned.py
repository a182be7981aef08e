"""What a gateway learns from its own decisions, for workers whose holdings it cannot follow.

When no event stream reaches a gateway for a worker (Redis and the worker's stream both out of
reach, or a worker known only from the shared membership), the index knows nothing of what that
worker holds. The gateway still knows what it sent there: a request's chunks are cached on its
worker after the prefill, until the KV TTL or the worker's capacity pushes them out. This record
keeps exactly that -- per worker, the chunks this gateway routed there, least recently routed first,
each until ``ttl_s`` after its last use and at most the worker's capacity -- and answers lookups
for the workers the router marks as not followed. It never overrides what an event stream says.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable, Collection, Sequence

from kvgate.index.types import LookupResult
from kvgate.proto.ids import ChunkHash, Tier, WorkerId


class LearnedHoldings:
    """chunk hash -> workers this gateway routed it to, each entry until ``ttl_s`` after its last
    use, per worker at most its capacity in chunks (least recently routed dropped first), and at
    most ``max_entries`` (chunk, worker) entries in all. Memory: about 200 B per entry."""

    def __init__(
        self, ttl_s: float, max_entries: int = 1_000_000, monotonic: Callable[[], float] = time.monotonic
    ) -> None:
        if ttl_s <= 0 or max_entries < 1:
            raise ValueError("ttl_s must be positive and max_entries >= 1")
        self._ttl_s = ttl_s
        self._max = max_entries
        self._now = monotonic
        self._held: dict[WorkerId, OrderedDict[ChunkHash, float]] = {}  # oldest use first
        self._holders: dict[ChunkHash, set[WorkerId]] = {}
        self._order: OrderedDict[WorkerId, None] = OrderedDict()  # workers, least recently used first
        self._entries = 0

    def record(self, hashes: Sequence[ChunkHash], worker_id: WorkerId, capacity_chunks: int = 0) -> None:
        """``hashes`` were routed to ``worker_id`` now: it holds them for ``ttl_s`` from now (its
        least recently routed chunks beyond ``capacity_chunks`` are dropped; 0: no bound but the
        total)."""
        if not hashes:
            return
        held = self._held.setdefault(worker_id, OrderedDict())
        self._order[worker_id] = None
        self._order.move_to_end(worker_id)
        deadline = self._now() + self._ttl_s
        for h in hashes:
            if h not in held:
                self._holders.setdefault(h, set()).add(worker_id)
                self._entries += 1
            held[h] = deadline
            held.move_to_end(h)
        self._expire(held, worker_id, capacity_chunks)
        while self._entries > self._max:
            self._drop_oldest(self._held[next(iter(self._order))], next(iter(self._order)))

    def merge(
        self, lookup: LookupResult, hashes: Sequence[ChunkHash], workers: Collection[WorkerId]
    ) -> LookupResult:
        """``lookup`` with the runs of ``workers`` (those not followed) replaced by what this gateway
        learned, as GPU chunks, where that is longer."""
        now = self._now()
        runs: dict[WorkerId, int] = {}
        active = set(workers) & self._holders.get(hashes[0], set()) if hashes else set()
        for i, h in enumerate(hashes):
            active = {w for w in active if self._held[w].get(h, 0.0) > now}
            if not active:
                break
            for w in active:
                runs[w] = i + 1
        longer = {}
        for worker, length in runs.items():
            match = lookup.match_for(worker)
            if match is None or length > len(match.tiers):
                longer[worker] = Tier.GPU.value * length
        return lookup.with_runs(longer) if longer else lookup

    def forget(self, worker_id: WorkerId) -> None:
        """Drops all this gateway learned of ``worker_id`` (it failed or restarted)."""
        held = self._held.pop(worker_id, None)
        self._order.pop(worker_id, None)
        for h in held or ():
            self._unhold(h, worker_id)

    def __len__(self) -> int:
        return self._entries

    def _expire(self, held: OrderedDict[ChunkHash, float], worker_id: WorkerId, capacity: int) -> None:
        now = self._now()
        while held and (next(iter(held.values())) <= now or 0 < capacity < len(held)):
            self._drop_oldest(held, worker_id)

    def _drop_oldest(self, held: OrderedDict[ChunkHash, float], worker_id: WorkerId) -> None:
        h, _ = held.popitem(last=False)
        self._unhold(h, worker_id)
        if not held:
            self._held.pop(worker_id, None)
            self._order.pop(worker_id, None)

    def _unhold(self, h: ChunkHash, worker_id: WorkerId) -> None:
        holders = self._holders.get(h)
        if holders is not None:
            holders.discard(worker_id)
            if not holders:
                del self._holders[h]
        self._entries -= 1
