"""The event-driven replay of one policy: arrivals, prefills, decodes and heartbeats in time order.

Simulated time moves from event to event (a heap of ``(time, kind, tie)``; nothing ticks per ms) and
drives a :class:`ManualClock` that the real index and every expiry read. Per event:

- **arrival**: the gateway's step, by the gateway's code -- live workers from the index, then
  :meth:`Router.route` (index lookup, the policy, pending entries, in-flight tokens); the request joins
  the chosen worker's FIFO queue.
- **prefill done** (first token): the worker stores the prompt's chunks and publishes the changes as the
  next numbered :class:`EventBatch`, applied to the index at once; the router is told
  (:meth:`Router.prefill_done`, as the dispatcher does at the first token, and :meth:`Router.reused`
  with the tokens the worker reused, as it does at the reply's end); TTFT is recorded; the next
  queued prefill starts.
- **fetch done**: a request whose decision named a KV source (:mod:`kvgate.gateway.routing.kv_source`)
  joined its worker's queue at arrival, and the worker began fetching the source's run of the prompt
  (at ``kv_fetch_tokens_per_s``); now the fetched chunks are stored there and published, and the
  request may start (the worker holds its queue, in order, behind a request whose fetch is running).
- **decode done**: the request's KV stops being in use.
- **heartbeat** (per worker, every ``heartbeat_s``, staggered): TTL sweep (evictions published), then
  the load figures go to the index.
- **load report** (per worker, every ``load_report_s``): the load figures, if they changed since the
  last report (a worker's event stream pushes them so).

With ``admissions`` each arrival is also announced by the chosen worker as an :class:`Admission` (the
chunks it will compute and its load with the request queued), as its event stream does, so every
gateway sees the new prefix pending there and the queue grown.

With several gateways (``gateways``), each has its own index replica, router (pending record,
in-flight accounting) and request stream (a load balancer picks a gateway per request at random); a
worker's batches and load reports reach each replica ``event_delay_s`` later (**delivery** events).

Without index events (``index_events`` False) nothing is delivered: each gateway routes over the
workers as registered at the start, marked not followed, so its router uses what it learned from its
own decisions (:class:`~kvgate.gateway.routing.learned.LearnedHoldings`).

Events at one instant run in the order prefill done, decode done, delivery, heartbeat, load report,
arrival, fetch done.
"""

from __future__ import annotations

import heapq
import itertools
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from enum import IntEnum

import xxhash

from kvgate.common.clock import ManualClock
from kvgate.gateway.routing.router import Router
from kvgate.gateway.routing.types import KVSource, Routed, RouteDecision, RoutingPolicy, WarmUp
from kvgate.index import IndexSettings, MemoryPrefixIndex, WorkerStatus
from kvgate.index.admission import admission_wait_s
from kvgate.proto.events import Admission, EventBatch
from kvgate.proto.ids import ChunkHash, WorkerId
from kvgate.proto.workers import WorkerLoad
from kvgate.sim.reference import unlimited_reuse
from kvgate.sim.results import PolicyResult, RequestRecord, summarize
from kvgate.sim.settings import SimSettings
from kvgate.sim.timing import TimeModel
from kvgate.sim.worker import SimJob, SimWorker
from kvgate.sim.workload import Workload

Progress = Callable[[int, int, float], None]  # (requests routed, total, simulated seconds)
PROGRESS_EVERY = 250
# A warm-up is prefilled in pieces of at most this many tokens: the engine's step budget
# (SchedulingLimits.max_tokens_per_step), after which a request that arrived overtakes it.
WARM_PIECE_TOKENS = 2048
# An admission is the worker's answer to the gateway's call: it never arrives in the millisecond the
# call was made (the router counts what it routed in a report's millisecond on top of that report).
ADMISSION_DELAY_S = 0.001


class _Kind(IntEnum):
    PREFILL_DONE = 0
    DECODE_DONE = 1
    DELIVERY = 2
    HEARTBEAT = 3
    LOAD_REPORT = 4
    ARRIVAL = 5
    FETCH_DONE = 6


Delivery = EventBatch | WorkerStatus | Admission  # what reaches a gateway's replica


class _Gateway:
    """One gateway replica of the simulated deployment: its index replica and its router."""

    def __init__(self, index: MemoryPrefixIndex, router: Router) -> None:
        self.index = index
        self.router = router
        self.static: list[WorkerStatus] | None = None  # the workers when no index events arrive

    async def workers(self) -> list[WorkerStatus]:
        return self.static if self.static is not None else await self.index.workers()

    async def receive(self, item: Delivery) -> None:
        if isinstance(item, WorkerStatus):
            await self.index.heartbeat(item.info.worker_id, item.info.epoch, item.load)
        elif isinstance(item, Admission):
            if item.pending:
                wait_s = admission_wait_s(item.load, self.router.config.prefill_tokens_per_s)
                await self.index.add_pending(item.pending, item.worker_id, wait_s)
            await self.index.heartbeat(item.worker_id, item.epoch, item.load)
        elif not (result := await self.index.apply(item)).ok:
            raise RuntimeError(f"{item.worker_id}: the index refused batch {item.seq}: {result.status}")


class ClusterSim:
    """One policy over one workload; :meth:`run` once."""

    def __init__(
        self,
        workload: Workload,
        settings: SimSettings,
        policy: RoutingPolicy,
        fallback: RoutingPolicy,
        progress: Progress | None = None,
    ) -> None:
        self._workload = workload
        self._settings = settings
        self._clock = ManualClock()
        self._start_ms = self._clock.now_ms()
        index_settings = IndexSettings()
        if settings.heartbeat_s >= index_settings.heartbeat_ttl_s:
            raise ValueError(
                f"heartbeat_s must be below the index's heartbeat TTL ({index_settings.heartbeat_ttl_s} s)"
            )
        # Each router runs on the simulated clock: its local pending record and in-flight accounting
        # age with simulated time, as they would with real time in a gateway.
        self._gateways = [
            _gateway(index_settings, self._clock, policy, fallback, settings.chunk_size, settings.ttl_s)
            for _ in range(settings.gateways)
        ]
        self._deliveries: dict[int, tuple[int, Delivery]] = {}  # delivery id -> (gateway, item)
        self._delivery_ids = itertools.count()
        self._reported: dict[int, WorkerLoad] = {}  # worker -> the load it last reported
        self._routed: dict[int, tuple[int, Routed]] = {}  # request -> (gateway, decision), until prefill
        timing = TimeModel.of(settings)
        self._workers = [SimWorker(WorkerId(f"w{i:03d}"), settings, timing) for i in range(settings.workers)]
        self._by_id = {w.worker_id: i for i, w in enumerate(self._workers)}
        self._timing = timing
        self._events: list[tuple[float, int, int, int]] = []  # (time, kind, tie, request or worker)
        self._tie = itertools.count()
        self._records: list[RequestRecord | None] = [None] * len(workload.requests)
        self._decoding: dict[int, SimJob] = {}
        self._fetching: dict[int, tuple[SimJob, int, int]] = {}  # request -> (job, worker, tokens)
        self._busy = 0  # requests not finished yet (heartbeats stop at 0)
        self._warm_ids = itertools.count(-1, -1)  # warm-up pieces: negative, never a request's index
        self.warm_up_tokens = 0  # prompt tokens the router asked workers to warm up
        self._progress = progress

    async def run(self) -> PolicyResult:
        """Replays the whole workload; returns the policy's numbers. Call once."""
        began = time.perf_counter()
        await self._start()
        routed = 0
        while self._events:
            now_s, kind, _, payload = heapq.heappop(self._events)
            self._move_clock(now_s)
            await self._handle(_Kind(kind), now_s, payload)
            if kind == _Kind.ARRIVAL:
                routed += 1
                if self._progress and routed % PROGRESS_EVERY == 0:
                    self._progress(routed, len(self._records), now_s)
        result = summarize(
            self.records,
            [w.computed_tokens for w in self._workers],
            [w.cache.counters for w in self._workers],
            time.perf_counter() - began,
            [u for u, r in zip(unlimited_reuse(self._workload), self._records, strict=True) if r is not None],
        )
        return replace(result, warm_up_tokens=self.warm_up_tokens)

    @property
    def records(self) -> list[RequestRecord]:
        """The finished requests' records, in arrival order."""
        return [r for r in self._records if r is not None]

    async def _start(self) -> None:
        for i, worker in enumerate(self._workers):
            for gateway in self._gateways:
                await gateway.index.register(worker.info, worker.load(0.0))
            self._push(self._settings.heartbeat_s * (i + 1) / len(self._workers), _Kind.HEARTBEAT, i)
            self._push(self._settings.load_report_s * (i + 1) / len(self._workers), _Kind.LOAD_REPORT, i)
        if not self._settings.index_events:
            for gateway in self._gateways:
                gateway.static = [replace(s, followed=False) for s in await gateway.index.workers()]
        for i, arrival_s in enumerate(self._workload.arrivals_s(self._settings.speed)):
            self._push(arrival_s, _Kind.ARRIVAL, i)
            self._busy += 1

    async def _handle(self, kind: _Kind, now_s: float, payload: int) -> None:
        """``payload`` is the request's index for arrivals and decodes, the worker's otherwise."""
        if kind is _Kind.ARRIVAL:
            await self._arrive(payload, now_s)
        elif kind is _Kind.FETCH_DONE:
            await self._fetched(payload, now_s)
        elif kind is _Kind.PREFILL_DONE:
            await self._prefill_done(payload, now_s)
        elif kind is _Kind.DECODE_DONE:
            job = self._decoding.pop(payload)
            self._workers[self._by_id[job.decision.worker_id]].finish_decode(job)
            self._busy -= 1
        elif kind is _Kind.DELIVERY:
            gateway, item = self._deliveries.pop(payload)
            await self._gateways[gateway].receive(item)
        elif kind is _Kind.LOAD_REPORT:
            await self._load_report(payload, now_s)
        else:
            await self._heartbeat(payload, now_s)

    async def _arrive(self, i: int, now_s: float) -> None:
        request = self._workload.requests[i]
        hashes = self._workload.hashes[i]
        key = self._request_key(i)
        g = (key >> 32) % len(self._gateways)  # the load balancer's pick, independent of the route's
        gateway = self._gateways[g]
        live = await gateway.workers()
        routed = await gateway.router.route(hashes, request.input_length, live, key)
        await gateway.router.drain()  # the replica's pending entries land before the next event
        self._routed[i] = (g, routed)
        job = SimJob(i, now_s, request.input_length, request.output_length, hashes, routed.decision)
        worker_index = self._by_id[routed.decision.worker_id]
        fetch = self._fetch_plan(job, routed.source, worker_index)
        if fetch is not None:
            job.fetch_chunks, tokens = fetch
            job.ready_s = now_s + tokens / self._settings.kv_fetch_tokens_per_s
            self._fetching[i] = (job, worker_index, tokens)
            self._push(job.ready_s, _Kind.FETCH_DONE, i)
        await self._queue(job, worker_index, now_s)
        if routed.warm is not None:
            await self._warm_up(routed.warm, routed.decision, hashes, now_s)

    async def _queue(self, job: SimJob, worker_index: int, now_s: float) -> None:
        """``job`` joins its worker's queue (a prefill starts if the worker is free) and, with
        ``admissions``, the worker announces it."""
        worker = self._workers[worker_index]
        worker.enqueue(job, self._clock.now_ms())
        self._start_prefill(worker_index, now_s)
        if self._settings.admissions:
            self._reported[worker_index] = load = worker.load(now_s)
            pending = tuple(job.hashes[job.held_chunks :])
            await self._publish(
                Admission(worker.worker_id, worker.info.epoch, pending, load), now_s, ADMISSION_DELAY_S
            )

    def _fetch_plan(self, job: SimJob, source: KVSource | None, worker_index: int) -> tuple[int, int] | None:
        """(chunks, tokens) the chosen worker fetches from ``source`` before starting ``job``: the
        source's run of the prompt now (at most the tokens the decision names), past the worker's
        own; None when there is nothing to fetch or workers do not fetch (``kv_fetch_tokens_per_s``
        0). The request queues at once and starts no sooner than the fetch ends (:meth:`_fetched`)."""
        if source is None or not self._settings.kv_fetch_tokens_per_s:
            return None
        now_ms, size = self._clock.now_ms(), self._settings.chunk_size
        held = len(self._workers[self._by_id[source.worker_id]].cache.match(job.hashes, now_ms))
        held = min(held, -(-source.tokens // size))
        own = len(self._workers[worker_index].cache.match(job.hashes, now_ms))
        if held <= own:
            return None
        return held, min(held * size, job.prompt_tokens) - own * size

    async def _fetched(self, i: int, now_s: float) -> None:
        """A fetch ended: the fetched chunks are cached on the worker (published as stored, as the
        engine's import publishes them), and the request may start."""
        job, worker_index, tokens = self._fetching.pop(i)
        worker = self._workers[worker_index]
        stored = worker.cache.store(job.hashes[: job.fetch_chunks], self._clock.now_ms())
        await self._publish(worker.batch(stored), now_s)
        job.fetched_tokens = tokens
        self._start_prefill(worker_index, now_s)

    async def _warm_up(
        self, warm: WarmUp, decision: RouteDecision, hashes: Sequence[ChunkHash], now_s: float
    ) -> None:
        """Queues ``warm``'s prefill on its worker as background pieces of at most
        ``WARM_PIECE_TOKENS`` (each a prefix of the next: a piece reuses the ones before it), and
        announces its chunks as the worker's admission does."""
        chunks = warm.tokens // self._settings.chunk_size
        if not chunks:
            return
        worker_index = self._by_id[warm.worker_id]
        worker = self._workers[worker_index]
        size = self._settings.chunk_size
        step = max(WARM_PIECE_TOKENS // size, 1)
        for end in [*range(step, chunks, step), chunks]:
            piece = SimJob(
                next(self._warm_ids),
                now_s,
                end * size,
                0,
                hashes[:end],
                decision,
                background=True,
                warm_up=True,
            )
            worker.enqueue(piece, self._clock.now_ms())
        self.warm_up_tokens += warm.tokens
        self._start_prefill(worker_index, now_s)
        if self._settings.admissions:
            self._reported[worker_index] = load = worker.load(now_s)
            admission = Admission(worker.worker_id, worker.info.epoch, tuple(hashes[:chunks]), load)
            await self._publish(admission, now_s, ADMISSION_DELAY_S)

    def _start_prefill(self, worker_index: int, now_s: float) -> None:
        end_s = self._workers[worker_index].start_next(now_s, self._clock.now_ms())
        if end_s is not None:
            self._push(end_s, _Kind.PREFILL_DONE, worker_index)

    async def _prefill_done(self, worker_index: int, now_s: float) -> None:
        worker = self._workers[worker_index]
        job, batch = worker.finish_prefill(self._clock.now_ms())
        await self._publish(batch, now_s)
        if job.warm_up:  # a warm-up's piece: no request to answer
            worker.finish_decode(job)
            self._start_prefill(worker_index, now_s)
            return
        g, routed = self._routed.pop(job.index)
        self._gateways[g].router.prefill_done(routed)
        self._gateways[g].router.reused(routed, job.cached_tokens)  # the reply's usage, in a real gateway
        self._records[job.index] = _record(job, worker_index, now_s)
        self._decoding[job.index] = job
        self._push(now_s + self._timing.decode_s(job.output_tokens), _Kind.DECODE_DONE, job.index)
        self._start_prefill(worker_index, now_s)

    async def _heartbeat(self, i: int, now_s: float) -> None:
        worker = self._workers[i]
        batch = worker.expire(self._clock.now_ms())
        if batch is not None:
            await self._publish(batch, now_s)
        await self._report(i, now_s)
        if self._busy > 0:
            self._push(now_s + self._settings.heartbeat_s, _Kind.HEARTBEAT, i)

    async def _load_report(self, i: int, now_s: float) -> None:
        if self._workers[i].load(now_s) != self._reported.get(i):
            await self._report(i, now_s)
        if self._busy > 0:
            self._push(now_s + self._settings.load_report_s, _Kind.LOAD_REPORT, i)

    async def _report(self, i: int, now_s: float) -> None:
        worker = self._workers[i]
        self._reported[i] = load = worker.load(now_s)
        await self._publish(WorkerStatus(worker.info, load, 0, self._clock.now_ms()), now_s)

    async def _publish(self, item: Delivery, now_s: float, least_delay_s: float = 0.0) -> None:
        """To every gateway's replica, ``event_delay_s`` (at least ``least_delay_s``) later: at once
        when that is 0, else as delivery events (nowhere without index events)."""
        if not self._settings.index_events:
            return
        delay_s = max(self._settings.event_delay_s, least_delay_s)
        for g, gateway in enumerate(self._gateways):
            if delay_s == 0:
                await gateway.receive(item)
            else:
                delivery = next(self._delivery_ids)
                self._deliveries[delivery] = (g, item)
                self._push(now_s + delay_s, _Kind.DELIVERY, delivery)

    def _push(self, at_s: float, kind: _Kind, payload: int) -> None:
        heapq.heappush(self._events, (at_s, int(kind), next(self._tie), payload))

    def _move_clock(self, now_s: float) -> None:
        target_ms = self._start_ms + round(now_s * 1000)
        if target_ms > self._clock.now_ms():
            self._clock.advance((target_ms - self._clock.now_ms()) / 1000)

    def _request_key(self, i: int) -> int:
        return xxhash.xxh3_64_intdigest(f"{self._settings.seed}/{i}".encode())


def _gateway(
    settings: IndexSettings,
    clock: ManualClock,
    policy: RoutingPolicy,
    fallback: RoutingPolicy,
    chunk_size: int,
    kv_ttl_s: float,
) -> _Gateway:
    index = MemoryPrefixIndex(settings, clock)
    router = Router(index, policy, fallback, chunk_size, settings.pending_ttl_s, clock, kv_ttl_s=kv_ttl_s)
    return _Gateway(index, router)


def _record(job: SimJob, worker: int, now_s: float) -> RequestRecord:
    return RequestRecord(
        worker=worker,
        prompt_tokens=job.prompt_tokens,
        cached_tokens=job.cached_tokens,
        swapped_tokens=job.swapped_tokens,
        predicted_cached_tokens=job.decision.predicted_cached_tokens,
        ttft_s=now_s - job.arrival_s,
        queue_s=job.start_s - job.arrival_s,
        reason=job.decision.reason.value,
        estimated_ttft_s=job.decision.estimated_ttft_s,
        fetched_tokens=min(job.fetched_tokens, job.cached_tokens),
    )
