"""KV events: how a worker tells the index what it holds.

A worker emits one :class:`EventBatch` per engine step in which its holdings changed. Batches of one
(worker, epoch) carry consecutive sequence numbers starting at 1, so a receiver detects a lost batch
and asks for a :class:`Snapshot` (the worker's full state), which replaces everything it held.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from kvgate.proto.ids import ChunkHash, Epoch, SeqNo, Tier, WorkerId
from kvgate.proto.workers import WorkerLoad


class EventKind(StrEnum):
    """What happened to one chunk (or, for CLEARED, to all of the worker's chunks)."""

    STORED = "stored"  # now held in ``tier`` (new, swapped back in, or TTL refreshed) until expiry
    OFFLOADED = "offloaded"  # moved from the GPU tier to the CPU tier
    EVICTED = "evicted"  # gone from the worker entirely
    CLEARED = "cleared"  # everything gone (engine start, restart, reset)


@dataclass(frozen=True, slots=True)
class KVEvent:
    """One change. ``chunk`` is None only for CLEARED; ``tier`` and ``expires_at_ms`` (unix ms, the
    holding's TTL deadline) matter only for STORED and OFFLOADED (OFFLOADED implies ``Tier.CPU``)."""

    kind: EventKind
    chunk: ChunkHash | None = None
    tier: Tier = Tier.GPU
    expires_at_ms: int = 0

    def __post_init__(self) -> None:
        if (self.chunk is None) != (self.kind is EventKind.CLEARED):
            raise ValueError(f"{self.kind.value} event needs a chunk iff it is not CLEARED")
        if self.kind is EventKind.OFFLOADED and self.tier is not Tier.CPU:
            raise ValueError("an OFFLOADED event's tier is CPU")
        if self.tier is Tier.PENDING:
            raise ValueError("workers never publish PENDING holdings")

    @staticmethod
    def stored(chunk: ChunkHash, tier: Tier, expires_at_ms: int) -> KVEvent:
        return KVEvent(EventKind.STORED, chunk, tier, expires_at_ms)

    @staticmethod
    def offloaded(chunk: ChunkHash, expires_at_ms: int) -> KVEvent:
        return KVEvent(EventKind.OFFLOADED, chunk, Tier.CPU, expires_at_ms)

    @staticmethod
    def evicted(chunk: ChunkHash) -> KVEvent:
        return KVEvent(EventKind.EVICTED, chunk)

    @staticmethod
    def cleared() -> KVEvent:
        return KVEvent(EventKind.CLEARED)


@dataclass(frozen=True, slots=True)
class EventBatch:
    """Events of one engine step, applied atomically and in order."""

    worker_id: WorkerId
    epoch: Epoch
    seq: SeqNo
    events: tuple[KVEvent, ...]


@dataclass(frozen=True, slots=True)
class Holding:
    """One chunk a worker holds, as listed in a snapshot."""

    chunk: ChunkHash
    tier: Tier
    expires_at_ms: int


@dataclass(frozen=True, slots=True)
class Snapshot:
    """A worker's complete holdings as of batch ``seq``; replaces all it held before.

    After a snapshot the next batch expected is ``seq + 1``.
    """

    worker_id: WorkerId
    epoch: Epoch
    seq: SeqNo
    holdings: tuple[Holding, ...]


MAX_ADMISSION_CHUNKS = 8192
"""The most chunks one admission lists (a million tokens of 128-token chunks); a longer prompt's
admission lists its first uncached chunks."""


@dataclass(frozen=True, slots=True)
class Admission:
    """A worker took a request in: it will compute ``pending`` (the prompt's chunks after the run it
    holds, in chain order) and its load is now ``load`` (the request counted). Sent on the event
    stream as soon as the request is admitted, so every gateway sees where a new prefix is being
    built and how the queue grew, whichever gateway sent the request. A hint: never numbered, never
    part of a snapshot, and lost without harm (the stored chunks and the next load report follow)."""

    worker_id: WorkerId
    epoch: Epoch
    pending: tuple[ChunkHash, ...]
    load: WorkerLoad
