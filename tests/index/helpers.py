"""Builders for the index tests: readable chunk names, workers and batches."""

from __future__ import annotations

import xxhash

from kvgate.proto.events import EventBatch, Holding, KVEvent, Snapshot
from kvgate.proto.ids import ChunkHash, Epoch, SeqNo, Tier, WorkerId
from kvgate.proto.workers import WorkerInfo, WorkerLoad

A, B, C = WorkerId("worker-a"), WorkerId("worker-b"), WorkerId("worker-c")


def chunk(name: str | int) -> ChunkHash:
    """A deterministic 16-byte chunk hash named for readability."""
    return ChunkHash(xxhash.xxh3_128_digest(f"chunk-{name}".encode()))


def chain(*names: str | int) -> list[ChunkHash]:
    return [chunk(n) for n in names]


def info(worker: WorkerId, epoch: int = 1) -> WorkerInfo:
    return WorkerInfo(
        worker_id=worker,
        epoch=Epoch(epoch),
        address=f"127.0.0.1:{5000 + ord(worker[-1])}",
        fingerprint="f" * 32,
        model_id="test-model",
    )


def batch(worker: WorkerId, seq: int, *events: KVEvent, epoch: int = 1) -> EventBatch:
    return EventBatch(worker, Epoch(epoch), SeqNo(seq), tuple(events))


def stored(chunks: list[ChunkHash], expires_at_ms: int, tier: Tier = Tier.GPU) -> list[KVEvent]:
    return [KVEvent.stored(c, tier, expires_at_ms) for c in chunks]


def snapshot(worker: WorkerId, seq: int, holdings: list[Holding], epoch: int = 1) -> Snapshot:
    return Snapshot(worker, Epoch(epoch), SeqNo(seq), tuple(holdings))


LOAD = WorkerLoad(waiting_prefill_tokens=512, running_seqs=3, gpu_blocks_total=100, gpu_blocks_free=40)
