"""Publishing what the worker holds: chunk states in, numbered event batches and snapshots out."""

from __future__ import annotations

from typing import Protocol

from kvgate.proto.events import EventBatch, Holding, KVEvent, Snapshot
from kvgate.proto.ids import ChunkHash, Epoch, SeqNo, Tier, WorkerId


class EventPublisher(Protocol):
    """The manager reports chunk states; the worker drains one batch per engine step.

    Batches of one epoch carry consecutive seq numbers from 1; the first one starts with CLEARED.
    """

    def update(self, chunk: ChunkHash, holding: Holding | None) -> None:
        """Records ``chunk``'s current state (None: not held). Only the latest state per chunk since
        the last drain is published, so refreshes within a step coalesce. Idempotent."""
        ...

    def drain(self) -> EventBatch | None:
        """The changes since the last drain as one batch with the next seq; None (no seq used) when
        nothing changed."""
        ...

    def snapshot(self) -> Snapshot:
        """Every chunk held now, for a resync after the index reported a gap. Takes the next seq and
        includes everything updated so far, so the next drain starts after it."""
        ...


class StepEventPublisher:
    """In-memory :class:`EventPublisher` of one worker incarnation (``worker_id``, ``epoch``).

    Diffs each updated chunk's state against what it last published: none -> held is STORED (in the
    held tier), GPU -> CPU is OFFLOADED, held -> none is EVICTED, any other change (back to GPU, a new
    expiry) is STORED; an unchanged state publishes nothing.
    """

    def __init__(self, worker_id: WorkerId, epoch: Epoch) -> None:
        self.worker_id, self.epoch = worker_id, epoch
        self._seq = 0
        self._cleared = False  # CLEARED goes out with the first batch of the epoch
        self._held: dict[ChunkHash, Holding] = {}  # as published so far
        self._pending: dict[ChunkHash, Holding | None] = {}  # latest state per chunk since then

    def update(self, chunk: ChunkHash, holding: Holding | None) -> None:
        self._pending[chunk] = holding

    def drain(self) -> EventBatch | None:
        events = [] if self._cleared else [KVEvent.cleared()]
        for chunk, holding in self._pending.items():
            if event := _diff(chunk, self._held.get(chunk), holding):
                events.append(event)
        self._take_pending()
        if not events:
            return None
        self._cleared = True
        return EventBatch(self.worker_id, self.epoch, self._next_seq(), tuple(events))

    def snapshot(self) -> Snapshot:
        self._take_pending()
        self._cleared = True  # a snapshot replaces everything, CLEARED included
        return Snapshot(self.worker_id, self.epoch, self._next_seq(), tuple(self._held.values()))

    def _take_pending(self) -> None:
        for chunk, holding in self._pending.items():
            if holding is None:
                self._held.pop(chunk, None)
            else:
                self._held[chunk] = holding
        self._pending.clear()

    def _next_seq(self) -> SeqNo:
        self._seq += 1
        return SeqNo(self._seq)


def _diff(chunk: ChunkHash, old: Holding | None, new: Holding | None) -> KVEvent | None:
    if new is None:
        return None if old is None else KVEvent.evicted(chunk)
    if old == new:
        return None
    if old is not None and old.tier is Tier.GPU and new.tier is Tier.CPU:
        return KVEvent.offloaded(chunk, new.expires_at_ms)
    return KVEvent.stored(chunk, new.tier, new.expires_at_ms)
