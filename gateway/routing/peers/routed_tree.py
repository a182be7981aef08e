"""An approximate prefix tree per worker, built from routing decisions alone (the record SGLang's
and Ray Serve's routers keep instead of listening to the workers' KV events).

A radix tree over a prompt's text, at chunk granularity: chunk hashes chain (each one commits to
every token before it), so "worker w's tree holds the path to chunk i" is "w's set holds chunk i",
and a prompt's match on w is the run of its leading chunks in that set. Eviction drops least
recently routed leaves first, as the peers' LRU eviction does.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence

from kvgate.proto.ids import ChunkHash, WorkerId


class RoutedTree:
    """Mutable. Sizes are in chunks; a worker never routed to has size 0."""

    def __init__(self) -> None:
        self._holders: dict[ChunkHash, set[WorkerId]] = {}
        # per worker, chunks from least to most recently routed; a prompt's leaf is refreshed before
        # its root, so among equally recent chunks the deepest goes first
        self._lru: dict[WorkerId, OrderedDict[ChunkHash, None]] = {}

    def insert(self, chunks: Sequence[ChunkHash], worker_id: WorkerId) -> None:
        """Records that ``chunks`` (a prompt's, in order) were routed to ``worker_id`` now."""
        lru = self._lru.setdefault(worker_id, OrderedDict())
        for chunk in reversed(chunks):
            self._holders.setdefault(chunk, set()).add(worker_id)
            lru[chunk] = None
            lru.move_to_end(chunk)

    def matches(self, chunks: Sequence[ChunkHash]) -> dict[WorkerId, int]:
        """For each worker whose tree holds ``chunks[0]``, how many leading chunks it holds."""
        if not chunks or (first := self._holders.get(chunks[0])) is None:
            return {}
        runs: dict[WorkerId, int] = {}
        alive = set(first)
        for depth, chunk in enumerate(chunks[1:], start=1):
            holders = self._holders.get(chunk, set())
            for worker in alive - holders:
                runs[worker] = depth
            alive &= holders
            if not alive:
                break
        runs.update(dict.fromkeys(alive, len(chunks)))
        return runs

    def size(self, worker_id: WorkerId) -> int:
        lru = self._lru.get(worker_id)
        return len(lru) if lru is not None else 0

    def evict_to(self, max_chunks: int, above: int | None = None) -> None:
        """Shrinks to ``max_chunks`` every worker's tree larger than ``above`` (default: than
        ``max_chunks``), least recently routed chunks first."""
        limit = max_chunks if above is None else above
        for worker, lru in self._lru.items():
            if len(lru) <= limit:
                continue
            while len(lru) > max_chunks:
                chunk, _ = lru.popitem(last=False)
                self._drop(chunk, worker)

    def _drop(self, chunk: ChunkHash, worker: WorkerId) -> None:
        holders = self._holders[chunk]
        holders.discard(worker)
        if not holders:
            del self._holders[chunk]
