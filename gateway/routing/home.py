"""The home worker of a ``prompt_cache_key``: rendezvous hashing over the live workers, so a key
keeps its worker while workers come and go (only keys of a departed worker move)."""

from __future__ import annotations

from collections.abc import Iterable

import xxhash

from kvgate.proto.ids import WorkerId


def home_worker(key: str, workers: Iterable[WorkerId]) -> WorkerId | None:
    """The worker with the highest hash of (key, worker); None when there are no workers."""
    return max(workers, key=lambda w: xxhash.xxh3_64_intdigest(f"{key}\x00{w}".encode()), default=None)
