"""``EngineLoop``: one ``LLMEngine`` in its own thread, connected to the asyncio side.

Threads. The engine thread is the only one that touches the engine, except for its thread-safe
``add_request`` / ``abort`` / ``has_work``. It sleeps on a condition until there is work, a call to
run, a stop, or ``idle_tick_s`` passed (then it steps anyway, so TTL expiry is published and the load
figures stay fresh while idle; it never spins). After each step it hands the asyncio side, in one
``loop.call_soon_threadsafe``: the step's outputs, the step's event items, and a fresh
:class:`EngineStats`. Everything else here (the request sinks, admission, the stats reference) lives
on the event loop's thread, so it needs no lock.

Failure. An exception from ``step()`` leaves the engine unusable: the thread ends, every in-flight
request fails with :class:`EngineUnavailableError`, later submissions are refused, and ``on_broken``
is called (on the event loop) so the owner can report NOT_SERVING and exit the process; the worker
comes back under a new epoch. A stall is a failure too: when requests are in flight and no step has
finished for ``stall_timeout_s`` (a hung kernel, a deadlock), a watchdog on the event loop fails them
the same way with :class:`EngineStalledError`; the stuck thread is abandoned (it is a daemon).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import torch

from kvgate.proto.events import EventBatch
from kvgate.proto.ids import ChunkHash
from kvgate.workers.engine import EngineRequest, Grammar, LLMEngine, StepOutput
from kvgate.workers.service.engine_stats import EngineStats
from kvgate.workers.service.errors import (
    AdmissionFullError,
    DuplicateRequestError,
    EngineStalledError,
    EngineUnavailableError,
)
from kvgate.workers.service.holdings import EventItem
from kvgate.workers.service.request_stream import RequestSinks, RequestStream

log = logging.getLogger(__name__)

T = TypeVar("T")
_Call = tuple[Callable[[LLMEngine], Any], concurrent.futures.Future]


def _ignore(*_: object) -> None:
    return None


class EngineLoop:
    """Owns the engine thread. Built and started by the worker's composition root on its event loop.

    ``max_in_flight``: requests admitted at once (running, waiting or queued); beyond it
    :meth:`submit` raises :class:`AdmissionFullError`. ``on_admit`` gets each admitted request's prompt
    chunk hashes, prompt length, the engine's figures as of the last step and whether it is a
    background prefill (on the event loop, inside :meth:`submit`). ``on_events`` gets each step's event items
    (consecutive seqs; a ``Snapshot`` replaces a run of lost batches) and ``on_broken`` the step's
    exception, both on the event loop. ``torch_threads``: torch's intra-op threads (None: leave as is).
    ``stall_timeout_s``: how long requests may be in flight without a step finishing before the engine
    is declared stalled (None: never); far above the slowest legitimate step.
    """

    def __init__(
        self,
        engine: LLMEngine,
        *,
        max_in_flight: int,
        on_events: Callable[[Sequence[EventItem]], None] = _ignore,
        on_admit: Callable[[tuple[ChunkHash, ...], int, EngineStats, bool], None] = _ignore,
        on_broken: Callable[[BaseException], None] = _ignore,
        idle_tick_s: float = 1.0,
        torch_threads: int | None = None,
        stall_timeout_s: float | None = None,
    ) -> None:
        if max_in_flight < 1 or idle_tick_s <= 0:
            raise ValueError("max_in_flight must be >= 1 and idle_tick_s > 0")
        if stall_timeout_s is not None and stall_timeout_s <= 0:
            raise ValueError("stall_timeout_s must be positive")
        self._engine = engine
        self._max_in_flight = max_in_flight
        self._on_events, self._on_broken, self._on_admit = on_events, on_broken, on_admit
        self._idle_tick_s, self._torch_threads = idle_tick_s, torch_threads
        self._cond = threading.Condition()
        self._calls: list[_Call] = []  # guarded by _cond
        self._stopping = False  # guarded by _cond
        self._last_seq = engine.last_event_seq  # engine thread
        self._sinks = RequestSinks()  # event loop only
        self._stats = EngineStats.read(engine)  # replaced by reference after each step
        self._error: BaseException | None = None
        self._aloop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._stall_timeout_s = stall_timeout_s
        self._progress_s = time.monotonic()  # event loop: last step finished, or work arrived idle
        self._watchdog: asyncio.Task[None] | None = None

    # -- event loop side ------------------------------------------------------------------------

    @property
    def stats(self) -> EngineStats:
        """The engine's figures as of its last step (no locking: an immutable record)."""
        return self._stats

    @property
    def error(self) -> BaseException | None:
        """The exception that broke the engine; None while it works."""
        return self._error

    @property
    def in_flight(self) -> int:
        """Requests submitted whose final output has not come back yet (aborted ones included)."""
        return len(self._sinks)

    def start(self) -> None:
        """Starts the engine thread; call it on the event loop that will consume the outputs."""
        if self._thread is not None:
            raise RuntimeError("the engine loop was started already")
        self._aloop = asyncio.get_running_loop()
        self._thread = threading.Thread(target=self._run, name="kvgate-engine", daemon=True)
        self._thread.start()
        if self._stall_timeout_s is not None:
            self._watchdog = asyncio.create_task(self._watch_stall(), name="kvgate-engine-stall-watchdog")

    async def compile_grammar(self, request: EngineRequest) -> Grammar | None:
        """``request``'s output constraint compiled against the engine's tokenizer, on a worker thread
        (compiling can take milliseconds); None when it has none. ValueError when it cannot be compiled."""
        constraint = request.sampling.constraint
        if constraint is None:
            return None
        return await asyncio.to_thread(self._engine.compile_grammar, constraint)

    async def ensure_adapter(self, request: EngineRequest) -> None:
        """Loads ``request``'s LoRA adapter on a worker thread if the engine may load it and has not
        yet (nothing without one). ValueError when the engine cannot hold it."""
        if request.adapter_id:
            await asyncio.to_thread(self._engine.ensure_adapter, request.adapter_id)

    def submit(self, request: EngineRequest, grammar: Grammar | None = None) -> RequestStream:
        """Hands ``request`` to the engine; returns its output stream. Raises EngineUnavailableError
        (broken or stopping), DuplicateRequestError, AdmissionFullError, or ValueError when the
        engine cannot run it (prompt too long, token id outside the vocabulary, ...). ``grammar``: its
        output constraint from :meth:`compile_grammar` (None with a constraint: compiled here, on the
        event loop's thread)."""
        self._check_usable()
        if request.request_id in self._sinks:
            raise DuplicateRequestError(f"request {request.request_id!r} is already in flight")
        if len(self._sinks) >= self._max_in_flight:
            raise AdmissionFullError(f"the worker holds {len(self._sinks)} requests, its limit")
        if not self._sinks:
            self._progress_s = time.monotonic()  # the stall clock starts with the work
        chunks = self._engine.add_request(request, grammar)  # validates; thread-safe
        stream = self._sinks.open(request.request_id, self._detach)
        self._wake()
        try:  # an announcement is a hint: it never fails the request it announces
            self._on_admit(chunks, request.num_prompt_tokens, self._stats, request.background)
        except Exception:
            log.exception("announcing the admission of %r failed", request.request_id)
        return stream

    def abort(self, request_id: str) -> bool:
        """Aborts a request at the next step boundary (its stream then ends with an ABORT output).
        Idempotent; False when the request is unknown or finished."""
        aborted = self._engine.abort(request_id)
        if aborted:
            self._wake()
        return aborted

    async def call(self, fn: Callable[[LLMEngine], T]) -> T:
        """Runs ``fn(engine)`` on the engine thread between two steps and returns its result (its
        exception propagates and does not break the engine). For reads that must not race a step and
        for tests; a blocking ``fn`` stalls the engine. Raises EngineUnavailableError once stopped."""
        future: concurrent.futures.Future[T] = concurrent.futures.Future()
        with self._cond:
            if self._stopping or self._error is not None:
                raise EngineUnavailableError("the engine loop is not running")
            self._calls.append((fn, future))
            self._cond.notify()
        return await asyncio.wrap_future(future)

    async def stop(self) -> None:
        """Stops the thread after its current step and joins it (off the event loop); in-flight
        requests fail with EngineUnavailableError. Idempotent."""
        with self._cond:
            self._stopping = True
            self._cond.notify()
        if self._watchdog is not None:
            self._watchdog.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._watchdog
        if self._thread is not None:
            await asyncio.to_thread(self._thread.join, None if self._error is None else 1.0)
        self._sinks.fail_all(EngineUnavailableError("the worker is shutting down"))

    def _check_usable(self) -> None:
        if self._error is not None:
            raise EngineUnavailableError(f"the engine failed: {self._error!r}")
        if self._stopping or self._thread is None:
            raise EngineUnavailableError("the engine loop is not running")

    def _wake(self) -> None:
        with self._cond:
            self._cond.notify()

    def _detach(self, request_id: str) -> None:
        """The consumer left: drop its outputs, abort the request; the sink stays until the final
        output, so admission counts the request until the engine has freed it."""
        if self._sinks.mute(request_id):
            self.abort(request_id)

    async def _watch_stall(self) -> None:
        """Fails the engine once requests waited ``stall_timeout_s`` without a finished step."""
        assert self._stall_timeout_s is not None
        period = min(1.0, self._stall_timeout_s / 4)
        while self._error is None:
            await asyncio.sleep(period)
            silent = time.monotonic() - self._progress_s
            if self._sinks and silent > self._stall_timeout_s:
                log.error("engine stalled: %d request(s) in flight, no step for %.1f s",
                          len(self._sinks), silent)  # fmt: skip
                with self._cond:
                    self._stopping = True
                self._on_failure(EngineStalledError(f"no engine step finished for {silent:.1f} s"))

    def _on_step(self, outputs: list[StepOutput], items: list[EventItem], stats: EngineStats) -> None:
        if self._error is not None:
            return  # declared stalled meanwhile: its requests were failed already
        self._progress_s = time.monotonic()
        self._stats = stats
        for out in outputs:
            self._sinks.deliver(out)
        if items:
            self._on_events(items)

    def _on_failure(self, exc: BaseException) -> None:
        if self._error is not None:
            return  # reported once (a stalled step that later raises is the same failure)
        self._error = exc
        self._sinks.fail_all(EngineUnavailableError(f"the engine failed: {exc!r}"))
        self._on_broken(exc)

    # -- engine thread --------------------------------------------------------------------------

    def _run(self) -> None:
        if self._torch_threads is not None:
            torch.set_num_threads(self._torch_threads)
        try:
            while (calls := self._next_calls()) is not None:
                _run_calls(self._engine, calls)
                if not self._step():
                    return
        finally:
            self._refuse_calls()

    def _next_calls(self) -> list[_Call] | None:
        """Waits for work, a call or a stop (at most ``idle_tick_s``); None = stop."""
        with self._cond:
            self._cond.wait_for(self._ready, timeout=self._idle_tick_s)
            if self._stopping:
                return None
            calls, self._calls = self._calls, []
            return calls

    def _ready(self) -> bool:
        return self._stopping or bool(self._calls) or self._engine.has_work()

    def _step(self) -> bool:
        """One engine step, its results posted to the event loop; False when the engine broke."""
        try:
            outputs = self._engine.step()
            items = self._take_events()
            stats = EngineStats.read(self._engine)
        except Exception as exc:
            log.exception("engine step failed; the engine is unusable")
            with self._cond:
                self._stopping = True
            self._post(self._on_failure, exc)
            return False
        return self._post(self._on_step, outputs, items, stats)

    def _take_events(self) -> list[EventItem]:
        """The step's batches; a snapshot instead when the engine dropped some (so consumers always
        see consecutive seqs)."""
        batches: list[EventBatch] = self._engine.take_events()
        if batches and batches[0].seq != self._last_seq + 1:
            log.warning("engine dropped event batches (%d -> %d); publishing a snapshot", self._last_seq,
                        batches[0].seq)  # fmt: skip
            snapshot = self._engine.snapshot()
            self._last_seq = snapshot.seq
            return [snapshot]
        if batches:
            self._last_seq = batches[-1].seq
        return list(batches)

    def _post(self, fn: Callable[..., None], *args: object) -> bool:
        """Schedules ``fn(*args)`` on the event loop; False when that loop is closed (then stop)."""
        assert self._aloop is not None
        try:
            self._aloop.call_soon_threadsafe(fn, *args)
        except RuntimeError:
            log.warning("the event loop is closed; stopping the engine thread")
            return False
        return True

    def _refuse_calls(self) -> None:
        with self._cond:
            self._stopping = True
            calls, self._calls = self._calls, []
        for _, future in calls:
            if future.set_running_or_notify_cancel():
                future.set_exception(EngineUnavailableError("the engine loop stopped"))


def _run_calls(engine: LLMEngine, calls: list[_Call]) -> None:
    for fn, future in calls:
        if not future.set_running_or_notify_cancel():
            continue  # the caller gave up
        try:
            future.set_result(fn(engine))
        except Exception as exc:
            future.set_exception(exc)
