"""``HoldingsMirror``: what the worker holds, rebuilt from its own event stream, for snapshots.

A subscriber (the gateway's event feed, the index publisher) that joins late or falls behind needs a
snapshot consistent with the batches that follow it. Taking one from the engine would use up a seq
number and so open a gap for every other consumer; the mirror instead replays the batches the engine
published (the same diff the engine's publisher keeps), so its snapshot at seq ``n`` is exactly the
state after batch ``n``, and batch ``n + 1`` follows it for everyone.
"""

from __future__ import annotations

from collections.abc import Sequence

from kvgate.proto.events import EventBatch, EventKind, Holding, KVEvent, Snapshot
from kvgate.proto.ids import ChunkHash, Epoch, SeqNo, Tier, WorkerId

EventItem = EventBatch | Snapshot
"""One message of a worker's event stream: a batch, or a snapshot that replaces everything."""


class HoldingsMirror:
    """Chunk -> holding of one worker incarnation, as of its last applied item. Event-loop only."""

    def __init__(self, worker_id: WorkerId, epoch: Epoch) -> None:
        self.worker_id, self.epoch = worker_id, epoch
        self.seq = SeqNo(0)  # 0: before the epoch's first batch
        self._held: dict[ChunkHash, Holding] = {}

    def __len__(self) -> int:
        return len(self._held)

    def apply(self, item: EventItem) -> None:
        """Replays a batch (in order) or adopts a snapshot; either way ``seq`` becomes the item's."""
        if isinstance(item, Snapshot):
            self._held = {h.chunk: h for h in item.holdings}
        else:
            for event in item.events:
                self._apply_event(event)
        self.seq = item.seq

    def held_run(self, chunks: Sequence[ChunkHash]) -> int:
        """How many of ``chunks`` are held from the first on (pure)."""
        for i, chunk in enumerate(chunks):
            if chunk not in self._held:
                return i
        return len(chunks)

    def snapshot(self) -> Snapshot:
        """Everything held as of ``seq`` (pure)."""
        return Snapshot(self.worker_id, self.epoch, self.seq, tuple(self._held.values()))

    def _apply_event(self, event: KVEvent) -> None:
        if event.kind is EventKind.CLEARED:
            self._held.clear()
        elif event.kind is EventKind.EVICTED:
            assert event.chunk is not None
            self._held.pop(event.chunk, None)
        else:  # STORED or OFFLOADED (whose tier is CPU)
            assert event.chunk is not None
            tier = Tier.CPU if event.kind is EventKind.OFFLOADED else event.tier
            self._held[event.chunk] = Holding(event.chunk, tier, event.expires_at_ms)
