"""The gateway's cache diagnostics: records each finished request, diagnoses it against its tenant's
recent requests as it finishes, and answers ``diagnose(tenant, request_id)``.

Once per finished request: shaping the prompt is a few vectorized passes over its token ids, the
comparison (skipped where the diagnosis does not depend on it: a request that reused every reusable
token is a ``hit``, one with no whole chunk to reuse is ``below_chunk``) a few vectorized calls per
earlier shape, at most ``compare_recent`` of them (the chunks whose hashes two chains share are not
compared token by token), and the excerpt decodes at most ``EXCERPT_TOKENS`` tokens. That is up to
milliseconds for a long prompt (about 0.5 ms for 8k tokens against 64 earlier ones sharing its opening,
2.4 ms for 128k, on one core of the 2-core machine of docs/BENCHMARKS.md), so it runs in a worker thread
(``asyncio.to_thread``), not on the event loop, except a prompt of at most ``INLINE_TOKENS`` that
needs no comparison (shaped in tens of microseconds, less than the hop); the record itself is read and
changed on the loop only.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from kvgate.common.tokenizer import Tokenizer
from kvgate.gateway.diagnosis.causes import Diagnosis
from kvgate.gateway.diagnosis.compare import Finding, compare
from kvgate.gateway.diagnosis.config import DiagnosisSettings
from kvgate.gateway.diagnosis.diagnose import Layout, diagnose, needs_comparison
from kvgate.gateway.diagnosis.record import RequestRecord, RouteNote, Scope, WorkerMark
from kvgate.gateway.diagnosis.shape import Shaper
from kvgate.gateway.diagnosis.store import RecentRequests
from kvgate.gateway.routing.types import Routed
from kvgate.index.types import WorkerStatus
from kvgate.proto.ids import ChunkHash
from kvgate.proto.sampling import Usage

log = logging.getLogger(__name__)

EXCERPT_TOKENS = 24  # tokens of the prompt shown from where it changed (when volatile)
EXCERPT_BEFORE = 4  # and before it, for context
INLINE_TOKENS = 1024  # a prompt this short that needs no comparison is shaped on the loop (< 50 us)

WorkerMarks = Callable[[], Mapping[str, WorkerMark]]
MissCounter = Callable[[Diagnosis], None]


@dataclass(frozen=True, slots=True)
class Finished:
    """A request that just finished, as the request core hands it over; ``attempts``: the workers
    tried to serve it (more than 1: the first choice failed or was busy)."""

    request_id: str
    tenant: str
    scope: Scope
    token_ids: np.ndarray
    chunk_hashes: Sequence[ChunkHash]
    usage: Usage
    routed: Routed
    attempts: int = 1


class CacheDiagnostics:
    """Owned by the composition root. ``workers``: the workers the gateway knows now (no I/O);
    ``on_diagnosis``: told every diagnosis (the miss metric); ``clock``: wall seconds."""

    def __init__(
        self,
        settings: DiagnosisSettings,
        layout: Layout,
        tokenizer: Tokenizer,
        workers: WorkerMarks,
        on_diagnosis: MissCounter | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.settings = settings
        self._layout = layout
        self._tokenizer = tokenizer
        self._workers = workers
        self._on_diagnosis = on_diagnosis
        self._clock = clock
        self._shaper = Shaper()
        self.recent = RecentRequests(settings, clock)

    async def finished(self, request: Finished) -> Diagnosis | None:
        """Records ``request`` and returns its diagnosis; None when diagnosis is off, or when it
        failed (logged: a diagnosis never fails the request it is about). Mutates the record. The
        request is compared with the tenant's requests recorded when it finished: one finishing at
        the same moment, still being diagnosed, is not among them."""
        if not self.settings.enabled:
            return None
        try:
            record = await self._diagnosed_record(request)
        except Exception:
            log.exception("the cache diagnosis of request %s failed", request.request_id)
            return None
        self.recent.add(record)
        if self._on_diagnosis is not None and record.diagnosis is not None:
            self._on_diagnosis(record.diagnosis)
        return record.diagnosis

    def report(self, tenant: str, request_id: str) -> dict[str, Any] | None:
        """The diagnosis of ``tenant``'s request ``request_id`` as one JSON object; None when this
        tenant has no such request on record (never seen, expired, another tenant's, or off)."""
        record = self.recent.get(tenant, request_id) if self.settings.enabled else None
        if record is None or record.diagnosis is None:
            return None
        diagnosis = record.diagnosis
        return {
            "request_id": record.request_id,
            "prompt_tokens": record.prompt_tokens,
            "cached_tokens": record.cached_tokens,
            "first_divergent_token": diagnosis.first_divergent_token,
            "cause": diagnosis.cause.value,
            "detail": diagnosis.detail,
            "evidence": diagnosis.evidence,
        }

    async def _diagnosed_record(self, request: Finished) -> RequestRecord:
        """``request``'s record with its diagnosis: on the loop for a prompt of at most
        ``INLINE_TOKENS`` that needs no comparison (tens of microseconds, less than the hop), else
        in a worker thread against the tenant's recent requests."""
        workers, usage = self._workers(), request.usage
        compared = needs_comparison(usage.prompt_tokens, usage.cached_tokens, self._layout)
        if not compared and len(request.token_ids) <= INLINE_TOKENS:
            return self._diagnosed(request, workers, (), self._clock())
        earlier = self.recent.recent(request.tenant, self.settings.compare_recent)
        return await asyncio.to_thread(self._diagnosed, request, workers, earlier, self._clock())

    def _diagnosed(
        self,
        request: Finished,
        workers: Mapping[str, WorkerMark],
        earlier: Sequence[RequestRecord],
        at_s: float,
    ) -> RequestRecord:
        """``request``'s record, finished at ``at_s``, with its diagnosis against ``earlier``. Runs in
        a worker thread (or on the loop, see :meth:`_diagnosed_record`): it reads its arguments
        (immutable records) and touches no shared state but the shaper's table, replaced whole."""
        record = self._record(request, workers, at_s)
        if needs_comparison(record.prompt_tokens, record.cached_tokens, self._layout):
            finding = compare(record, earlier, self._layout.chunk_size)
        else:
            finding = Finding(None, None)
        same = finding.same
        excerpt = self._excerpt(request.token_ids, same.shared_tokens) if same is not None else None
        return _with(record, diagnose(record, finding, workers, self._layout, excerpt))

    def _record(self, request: Finished, workers: Mapping[str, WorkerMark], at_s: float) -> RequestRecord:
        note = route_note(request.routed, self._layout.chunk_size, request.attempts)
        return RequestRecord(
            request.request_id,
            request.tenant,
            request.scope,
            at_s,
            request.usage.prompt_tokens,
            request.usage.cached_tokens,
            b"".join(request.chunk_hashes),
            self._shaper.shape(request.token_ids),
            note,
            workers.get(note.worker),
        )

    def _excerpt(self, token_ids: np.ndarray, at: int) -> str | None:
        if at >= len(token_ids):
            return None
        start = max(at - EXCERPT_BEFORE, 0)
        return self._tokenizer.decode(token_ids[start : at + EXCERPT_TOKENS], skip_special_tokens=True)


def route_note(routed: Routed, chunk_size: int, attempts: int = 1) -> RouteNote:
    """The routing decision of ``routed`` (the attempt that served the request, the ``attempts``-th),
    with the worker the index showed holding the most."""
    decision = routed.decision
    best = None
    if routed.lookup is not None and routed.lookup.matches:
        chosen = decision.worker_id
        best = max(routed.lookup.matches.values(), key=lambda m: (m.chunks, m.worker_id == chosen))
    return RouteNote(
        decision.worker_id,
        decision.reason.value,
        decision.predicted_cached_tokens,
        best.worker_id if best is not None and best.chunks else None,
        best.chunks * chunk_size if best is not None else 0,
        routed.degraded,
        attempts,
    )


def worker_marks(known: Sequence[WorkerStatus], live: Sequence[WorkerStatus]) -> dict[str, WorkerMark]:
    """The workers of a directory as marks: ``known`` ones, live when among ``live``."""
    routable = {w.info.worker_id for w in live}
    return {
        w.info.worker_id: WorkerMark(
            w.info.worker_id,
            w.info.epoch,
            w.info.worker_id in routable,
            w.load.evicted_ttl_blocks,
            w.load.evicted_pressure_blocks,
        )
        for w in known
    }


def _with(record: RequestRecord, diagnosis: Diagnosis) -> RequestRecord:
    return replace(record, diagnosis=diagnosis)
