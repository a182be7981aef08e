"""``AdmissionAnnouncer``: tells the event stream's subscribers (the gateways) about each request the
worker takes in, at once.

Without it a gateway learns of another gateway's request only when its chunks are stored (after the
prefill) and of the queue it adds at the next load report (up to 100 ms later): meanwhile replicas
that cannot see each other send the next requests of a burst sharing a new prefix elsewhere, and
pile onto a worker whose queue just grew. An :class:`Admission` carries the chunks the worker will
compute (the prompt's after the run it holds) and its load with the request counted.

The load is the last step's figures plus every request admitted since that step (the engine's
figures are replaced by reference after each step, so a new figures object starts the count again);
:meth:`load` is that figure for every report the worker makes. A request counts the prompt tokens
after its leading chunks that are held or that a request admitted in the last ``ahead_s`` computes
first (a burst sharing a new prefix counts it once, as the engine's own figures do).
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import replace

from kvgate.proto.events import MAX_ADMISSION_CHUNKS, Admission
from kvgate.proto.ids import ChunkHash, Epoch, WorkerId
from kvgate.proto.workers import WorkerLoad
from kvgate.workers.service.engine_stats import EngineStats
from kvgate.workers.service.event_hub import EventHub


class AdmissionAnnouncer:
    """Owned by the worker's composition root; :meth:`announce` is the engine loop's ``on_admit``
    (event loop only). ``chunk_size``: tokens per chunk of the worker's cache layout."""

    def __init__(
        self,
        hub: EventHub,
        worker_id: WorkerId,
        epoch: Epoch,
        chunk_size: int,
        ahead_s: float = 10.0,
        max_ahead: int = 65_536,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._hub = hub
        self._worker_id, self._epoch = worker_id, epoch
        self._chunk_size = chunk_size
        self._ahead_s, self._max_ahead, self._now = ahead_s, max_ahead, monotonic
        self._ahead: OrderedDict[ChunkHash, float] = OrderedDict()  # chunk -> until, oldest first
        self._base: EngineStats | None = None  # the figures the counts below are on top of
        self._seqs = 0
        self._tokens = 0

    def announce(
        self, chunks: tuple[ChunkHash, ...], prompt_tokens: int, stats: EngineStats, background: bool = False
    ) -> None:
        """Queues the admission of a ``prompt_tokens``-token prompt with ``chunks`` (its chunk
        hashes) for the hub's admission subscribers; ``stats``: the engine's last figures. A
        ``background`` prefill (a warm-up) announces its chunks but adds nothing to the load: every
        other request goes before it (the engine leaves it out of its queued prefill too)."""
        self._rebase(stats)
        held = self._hub.held_run(chunks)
        run = self._run_ahead(chunks, held)
        if not background:
            self._seqs += 1
            self._tokens += max(1, prompt_tokens - run * self._chunk_size)
        pending = chunks[held : held + MAX_ADMISSION_CHUNKS]
        self._hub.admit(Admission(self._worker_id, self._epoch, pending, self.load(stats)))

    def load(self, stats: EngineStats) -> WorkerLoad:
        """``stats``' load figures (the engine's last) with the requests admitted since counted: what
        the worker reports anywhere (event stream, ``Stats``, the index), so a report between two
        steps never takes an admission back."""
        self._rebase(stats)
        return replace(
            stats.load,
            waiting_seqs=stats.load.waiting_seqs + self._seqs,
            waiting_prefill_tokens=stats.load.waiting_prefill_tokens + self._tokens,
        )

    def _run_ahead(self, chunks: tuple[ChunkHash, ...], held: int) -> int:
        """The leading run of ``chunks`` held (the first ``held``) or computed first by a request
        admitted in the last ``ahead_s``; records ``chunks`` as computed ahead of later requests."""
        now = self._now()
        while self._ahead and (next(iter(self._ahead.values())) <= now or len(self._ahead) > self._max_ahead):
            self._ahead.popitem(last=False)
        run = held
        while run < len(chunks) and chunks[run] in self._ahead:
            run += 1
        for chunk in chunks[held:]:
            self._ahead[chunk] = now + self._ahead_s
            self._ahead.move_to_end(chunk)
        return run

    def _rebase(self, stats: EngineStats) -> None:
        if stats is not self._base:  # a step ended: its figures count everything admitted before it
            self._base, self._seqs, self._tokens = stats, 0, 0
