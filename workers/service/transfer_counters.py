"""``TransferCounters``: the KV a worker fetched from and sent to other workers (see :mod:`.kv_transfer`)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(slots=True)
class TransferCounters:
    """Monotonic counts since start; mutated on the event loop only (read from any thread)."""

    imported_blocks: int = 0  # blocks fetched and cached on the GPU tier
    imported_tokens: int = 0  # their tokens
    fetch_failures: int = 0  # fetches that failed (the request computed its prompt instead)
    exported_blocks: int = 0  # blocks sent to other workers
