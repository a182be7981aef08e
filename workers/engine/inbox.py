"""Requests and aborts handed to the engine from any thread, taken by the engine at a step boundary."""

from __future__ import annotations

import threading

from kvgate.workers.engine.sequence import Sequence


class Inbox:
    """Thread-safe. Knows every live request id (added and not yet retired) so that duplicates are
    refused and aborts of unknown or finished requests are told apart."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._added: list[Sequence] = []
        self._aborts: list[str] = []
        self._live: set[str] = set()

    def add(self, seq: Sequence) -> None:
        """Queues ``seq``; ValueError when its request id is live already."""
        with self._lock:
            if seq.request_id in self._live:
                raise ValueError(f"request {seq.request_id!r} is already in flight")
            self._live.add(seq.request_id)
            self._added.append(seq)

    def abort(self, request_id: str) -> bool:
        """Queues an abort; True iff the request is live (it may still finish on its own first)."""
        with self._lock:
            if request_id not in self._live:
                return False
            self._aborts.append(request_id)
            return True

    def take(self) -> tuple[list[Sequence], list[str]]:
        """Everything queued since the last take: (new sequences, aborted request ids), in order."""
        with self._lock:
            taken = self._added, self._aborts
            self._added, self._aborts = [], []
            return taken

    def retire(self, request_id: str) -> None:
        """``request_id`` finished: it is no longer live (and may be used again). Idempotent."""
        with self._lock:
            self._live.discard(request_id)

    def pending(self) -> tuple[int, int]:
        """(sequences queued, their prompt tokens), not taken yet."""
        with self._lock:
            return len(self._added), sum(seq.num_tokens for seq in self._added)

    def __bool__(self) -> bool:
        """True while something is queued."""
        with self._lock:
            return bool(self._added or self._aborts)
