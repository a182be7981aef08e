"""Dispatch: route a job, stream it from the chosen worker over gRPC, fail over before the first token.

Before the first token, a failed attempt is re-routed to another worker (bounded attempts): a busy
worker (RESOURCE_EXHAUSTED) is only skipped for this request, a failed one is also quarantined and a
dead one purged from the index. A failure mid-stream ends the stream with :class:`WorkerFailedError`
(tokens already sent cannot be taken back). Calls to a worker that left the directory while silent
are abandoned (see :mod:`.inflight`). When the consumer stops iterating (client disconnect), the gRPC
call is cancelled, which aborts the sequence on the worker.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator

import grpc

from kvgate.gateway.metrics import GatewayMetrics, StreamTimer
from kvgate.gateway.routing.router import Router
from kvgate.gateway.routing.types import Routed, WarmUp
from kvgate.gateway.upstream import calls
from kvgate.gateway.upstream.adapters import AdapterResidency
from kvgate.gateway.upstream.calls import DEAD, RetryableError
from kvgate.gateway.upstream.channels import ChannelPool
from kvgate.gateway.upstream.directory import WorkerDirectory
from kvgate.gateway.upstream.errors import (
    NoWorkersError,
    UpstreamError,
    WorkerFailedError,
    WorkersBusyError,
)
from kvgate.gateway.upstream.inflight import Attempt, InFlight
from kvgate.gateway.upstream.job import ChoiceDone, Done, Job, Tokens
from kvgate.gateway.upstream.warmups import WarmUpSender
from kvgate.index.base import PrefixIndex
from kvgate.index.types import IndexUnavailableError, WorkerStatus
from kvgate.proto.ids import WorkerId
from kvgate.proto.workers import WorkerInfo

log = logging.getLogger(__name__)


class Dispatcher:
    """Owned by the composition root. Its own state: the calls in flight (:class:`InFlight`) and
    where LoRA adapters were loaded (:class:`AdapterResidency`; ``adapter_load_s``: the seconds a
    worker is estimated to take to load one, counted in its TTFT estimate)."""

    def __init__(
        self,
        directory: WorkerDirectory,
        router: Router,
        channels: ChannelPool,
        index: PrefixIndex,
        max_attempts: int = 3,
        quarantine_s: float = 5.0,
        metrics: GatewayMetrics | None = None,
        inflight: InFlight | None = None,
        adapter_load_s: float = 2.0,
    ) -> None:
        self._directory = directory
        self._router = router
        self._channels = channels
        self._index = index
        self._max_attempts = max_attempts
        self._quarantine_s = quarantine_s
        self._metrics = metrics
        self._inflight = inflight if inflight is not None else InFlight()
        self._residency = AdapterResidency(adapter_load_s)
        self._warm_ups = WarmUpSender(channels, metrics)

    async def route(self, job: Job, exclude: frozenset[WorkerId] = frozenset()) -> tuple[Routed, WorkerInfo]:
        """Routes ``job`` (recording the decision); NoWorkersError when no worker is routable. Returns
        the chosen worker's registration as it was when chosen (it may be quarantined meanwhile)."""
        workers = self._routable(exclude, job.adapter_id)
        startup = self._residency.startup(workers, job.adapter_id)
        routed = await self._router.route(
            job.hashes, job.prompt_tokens, workers, job.request_key, job.cache_key, startup
        )
        return routed, next(w.info for w in workers if w.info.worker_id == routed.decision.worker_id)

    async def preview(self, job: Job) -> Routed:
        """The decision :meth:`route` would make, recording nothing (the dry-run view)."""
        workers = self._routable(frozenset(), job.adapter_id)
        startup = self._residency.startup(workers, job.adapter_id)
        return await self._router.preview(
            job.hashes, job.prompt_tokens, workers, job.request_key, job.cache_key, startup
        )

    async def reconcile(self) -> None:
        """Call after each directory refresh: abandons calls to incarnations that left the directory
        (see :mod:`.inflight`) and closes the channels no live worker or open call needs."""
        known = self._directory.known()
        self._residency.retain(w.info for w in known)
        for lost in self._inflight.abandon_lost({(w.info.worker_id, w.info.epoch) for w in known}):
            log.warning("worker %s (epoch %d) left the directory with a call open and silent; abandoning it",
                        lost.info.worker_id, lost.info.epoch)  # fmt: skip
        await self._channels.retain([w.info for w in known] + self._inflight.incarnations())

    def routable_count(self, adapter_id: str = "") -> int:
        """Workers requests (of LoRA adapter ``adapter_id``, when set) can be sent to now (quarantined
        ones included: they are the last resort)."""
        known = self._directory.known()
        return len([w for w in known if adapter_id in w.info.all_adapters]) if adapter_id else len(known)

    def adapters(self) -> tuple[str, ...]:
        """The LoRA adapter ids known workers hold or can load (sorted; no I/O)."""
        return tuple(sorted({a for w in self._directory.known() for a in w.info.all_adapters}))

    def _routable(self, exclude: frozenset[WorkerId], adapter_id: str = "") -> list[WorkerStatus]:
        """Live workers not in ``exclude`` that can serve ``adapter_id`` (when it is set: they hold it
        or can load it); when there are none, the quarantined ones alike (a worker that failed a
        moment ago beats refusing)."""

        def fits(w: WorkerStatus) -> bool:
            return w.info.worker_id not in exclude and (not adapter_id or adapter_id in w.info.all_adapters)

        workers = [w for w in self._directory.live() if fits(w)]
        workers = workers or [w for w in self._directory.known() if fits(w)]
        if not workers:
            held = f" holding LoRA adapter {adapter_id!r}" if adapter_id else ""
            raise NoWorkersError(f"no worker{held} is available to serve this request")
        return workers

    async def stream(self, job: Job) -> AsyncIterator[Tokens | ChoiceDone | Done]:
        """Yields Tokens (and, with ``n`` > 1, each choice's ChoiceDone) then exactly one Done; raises
        an UpstreamError subclass on failure."""
        timer = StreamTimer(self._metrics, time.monotonic()) if self._metrics else None
        try:
            async with contextlib.aclosing(self._stream(job)) as items:
                async for item in items:
                    if timer is not None:
                        self._observe(timer, item, job.tenant)
                    yield item
        except UpstreamError as exc:
            if self._metrics is not None:
                self._metrics.failed(type(exc).__name__)
            raise

    def _observe(self, timer: StreamTimer, item: Tokens | ChoiceDone | Done, tenant: str) -> None:
        if isinstance(item, ChoiceDone):
            return
        now = time.monotonic()
        if isinstance(item, Tokens):
            timer.tokens(now)
            return
        timer.done(now)
        self._metrics.finished(item.routed, item.usage, item.finish_reason.value, tenant)

    async def _stream(self, job: Job) -> AsyncIterator[Tokens | ChoiceDone | Done]:
        excluded: set[WorkerId] = set()
        last = grpc.StatusCode.UNAVAILABLE
        for attempt in range(1, self._max_attempts + 1):
            try:
                routed, info = await self.route(job, frozenset(excluded))
            except NoWorkersError:
                if not excluded:
                    raise
                break  # every worker was tried
            if self._metrics is not None:
                self._metrics.routed(routed)
            if routed.warm is not None:
                self._warm_up(job, routed.warm)
            try:
                # aclosing: when our consumer stops, the attempt's finally cancels the call now
                async with contextlib.aclosing(self._attempt(job, routed, info, attempt)) as items:
                    async for item in items:
                        yield item
                return
            except RetryableError as retry:
                last = retry.code
                excluded.add(info.worker_id)
                await self._on_failure(info, retry.code)
        if last is grpc.StatusCode.RESOURCE_EXHAUSTED:
            raise WorkersBusyError("every worker tried is at capacity")
        raise NoWorkersError(f"no worker could serve the request ({len(excluded)} tried)")

    async def _attempt(self, job: Job, routed: Routed, info: WorkerInfo, attempt: int) -> AsyncIterator:
        """One worker's stream. However it ends, the router hears that the prefill is over and the
        call is cancelled (a no-op when it finished; an abort on the worker when the client left)."""
        call: grpc.aio.UnaryStreamCall | None = None
        opened: Attempt | None = None
        prefill_open = True
        try:
            request = calls.request(job, routed, self._source(routed, info))
            call = self._channels.stub(info).Generate(request, timeout=calls.timeout(job))
            opened = self._inflight.open(info, call)
            messages = call.__aiter__()
            while True:
                opened.awaiting(self._inflight.now())  # silent from here until the worker sends
                try:
                    msg = await anext(messages)
                except StopAsyncIteration:
                    break
                opened.received()
                if prefill_open:
                    self._residency.served(info, job.adapter_id)
                prefill_open = prefill_open and self._close_prefill(routed)
                if msg.HasField("final"):
                    self._inflight.close(opened)  # over, even if our consumer never resumes us
                    finished = calls.done(msg.final, routed, attempt)
                    self._router.reused(routed, finished.usage.cached_tokens)
                    yield finished
                    return
                if msg.HasField("choice_end"):
                    yield calls.choice_done(msg.choice_end)
                    continue
                yield calls.tokens(msg.tokens)
            raise WorkerFailedError(f"worker {info.worker_id} ended the stream without a final message")
        except grpc.aio.AioRpcError as exc:
            raise calls.classify(exc, info, first_token_sent=not prefill_open) from exc
        except asyncio.CancelledError:
            if calls.cancelling():
                raise  # our own cancellation (client gone, shutdown): not a worker failure
            if opened is not None and opened.abandoned:  # the worker left the directory, silent
                raise calls.lost(info, first_token_sent=not prefill_open) from None
            raise UpstreamError(f"the call to worker {info.worker_id} was cancelled (shutdown)") from None
        finally:
            if opened is not None:
                self._inflight.close(opened)
            if prefill_open:
                self._close_prefill(routed)
            if call is not None:
                call.cancel()

    def _source(self, routed: Routed, chosen: WorkerInfo) -> WorkerInfo | None:
        """The live registration of the decision's KV source (None: it names none, or the source
        left, or it is the chosen worker itself)."""
        source = routed.source
        if source is None or source.worker_id == chosen.worker_id:
            return None
        return next((w.info for w in self._directory.live() if w.info.worker_id == source.worker_id), None)

    def _warm_up(self, job: Job, warm: WarmUp) -> None:
        """Sends the router's warm-up (off the request's path) to its worker, if still known."""
        info = next((w.info for w in self._directory.known() if w.info.worker_id == warm.worker_id), None)
        if info is not None:
            self._warm_ups.send(job, warm, info)

    async def close(self) -> None:
        """Cancels the warm-ups in flight (at shutdown, before the channels close)."""
        await self._warm_ups.close()

    def _close_prefill(self, routed: Routed) -> bool:
        """Tells the router the request's prefill is over; returns False (prefill no longer open)."""
        self._router.prefill_done(routed)
        return False

    async def _on_failure(self, info: WorkerInfo, code: grpc.StatusCode) -> None:
        """A worker refused or failed an attempt before its first token. A busy worker (its queue is
        full) is only skipped for this request; a failed one is quarantined, and a dead one purged."""
        if code not in DEAD:
            log.debug("worker %s refused the request (%s); trying another", info.worker_id, code.name)
            return
        log.warning("worker %s failed before the first token (%s); re-routing", info.worker_id, code.name)
        self._directory.quarantine(info.worker_id, self._quarantine_s)
        self._router.forget(info.worker_id)
        with contextlib.suppress(IndexUnavailableError):
            await self._index.purge(info.worker_id)
