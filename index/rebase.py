"""Expiry times moved from a worker's clock onto the reader's: a skewed clock on either side must not
shorten or stretch what the index believes a worker holds."""

from __future__ import annotations

from dataclasses import replace

from kvgate.proto.events import EventBatch, EventKind, Snapshot


def clock_offset_ms(sent_ms: int, received_ms: int, remote_now_ms: int) -> int:
    """The reader's clock minus the remote's, from one call sent at ``sent_ms`` and answered at
    ``received_ms`` (reader's clock) with the remote's ``remote_now_ms`` (0: unknown, so 0)."""
    if remote_now_ms <= 0:
        return 0
    return (sent_ms + received_ms) // 2 - remote_now_ms


def rebase_batch(batch: EventBatch, offset_ms: int) -> EventBatch:
    """``batch`` with every expiry moved by ``offset_ms``."""
    if not offset_ms:
        return batch
    events = tuple(
        replace(e, expires_at_ms=e.expires_at_ms + offset_ms) if e.kind in _TIMED else e for e in batch.events
    )
    return replace(batch, events=events)


def rebase_snapshot(snapshot: Snapshot, offset_ms: int) -> Snapshot:
    """``snapshot`` with every holding's expiry moved by ``offset_ms``."""
    if not offset_ms:
        return snapshot
    holdings = tuple(replace(h, expires_at_ms=h.expires_at_ms + offset_ms) for h in snapshot.holdings)
    return replace(snapshot, holdings=holdings)


_TIMED = (EventKind.STORED, EventKind.OFFLOADED)
