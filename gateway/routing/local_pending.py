"""This gateway's own recent routing decisions, consulted with no await in between.

Concurrent requests of one burst all look the index up before any of them has written its
pending entry; the decisions themselves are synchronous, so a process-local record made at
decision time keeps the burst together within one gateway (the index's pending entries do the same
across gateways, a round trip later).

An entry lasts the TTL after the time its request is expected to wait in the worker's queue: a
prompt queued behind others is still going to be computed there, and the next request that shares
it should follow it rather than compute it a second time elsewhere. Each worker keeps its own
entries, so a shared opening (a system prompt) routed to several workers does not hide the pending
run of any of them.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable, Sequence

from kvgate.index.settings import MAX_PENDING_WAIT_S
from kvgate.index.types import LookupResult
from kvgate.proto.ids import ChunkHash, Tier, WorkerId

MAX_WAIT_S = MAX_PENDING_WAIT_S  # an expected wait longer than this keeps an entry no longer, as in the index
MAX_ENTRIES = 500_000  # past this, the least recently recorded entries go first (bounded memory)


class LocalPending:
    """(chunk hash, worker) -> deadline of the latest decision that sent the chunk there."""

    def __init__(
        self, ttl_s: float, monotonic: Callable[[], float] = time.monotonic, max_entries: int = MAX_ENTRIES
    ) -> None:
        self._ttl_s = ttl_s
        self._max_entries = max_entries
        self._now = monotonic
        self._entries: OrderedDict[tuple[ChunkHash, WorkerId], float] = OrderedDict()
        self._workers: dict[ChunkHash, set[WorkerId]] = {}

    def record(self, hashes: Sequence[ChunkHash], worker_id: WorkerId, wait_s: float = 0.0) -> None:
        """Remembers that ``hashes`` were just routed to ``worker_id``, for the TTL after the
        ``wait_s`` the request is expected to wait before they are computed (at most
        ``MAX_WAIT_S``); drops expired entries (from the oldest, up to the first that has not
        expired) and the oldest beyond ``MAX_ENTRIES``."""
        now = self._now()
        deadline = now + self._ttl_s + min(max(wait_s, 0.0), MAX_WAIT_S)
        for h in hashes:
            key = (h, worker_id)
            self._entries[key] = deadline
            self._entries.move_to_end(key)
            self._workers.setdefault(h, set()).add(worker_id)
        while self._entries and (
            next(iter(self._entries.values())) <= now or len(self._entries) > self._max_entries
        ):
            (h, worker), _ = self._entries.popitem(last=False)
            holders = self._workers[h]
            holders.discard(worker)
            if not holders:
                del self._workers[h]

    def merge(self, lookup: LookupResult, hashes: Sequence[ChunkHash]) -> LookupResult:
        """``lookup`` with each worker's run extended by its unexpired local entries (as PENDING):
        from the end of what the index shows it holding, chunk by chunk while it has one."""
        now = self._now()
        seen: set[WorkerId] = set()
        for h in hashes:
            seen.update(self._workers.get(h, ()))
        longer: dict[WorkerId, str] = {}
        for worker in seen:
            match = lookup.match_for(worker)
            known = match.tiers if match is not None else ""
            end = len(known)
            while end < len(hashes) and self._entries.get((hashes[end], worker), 0.0) > now:
                end += 1
            if end > len(known):
                longer[worker] = known + Tier.PENDING.value * (end - len(known))
        return lookup.with_runs(longer)

    def __len__(self) -> int:
        return len(self._entries)
