"""Embedded mode: the gateway's own :class:`MemoryPrefixIndex`, fed from each worker over gRPC.

Without Redis, workers publish nowhere; instead, per worker address, one owner task here keeps the
index true for that worker, in sessions:

1. ``Stats`` -> the worker's registration record and load -> ``index.register``;
2. ``SubscribeEvents`` (with admissions): the first message, a snapshot, is ``resync``-ed, every batch
   ``apply``-ed (a later snapshot, sent when this gateway fell behind, is resynced too), every load
   update (the worker pushes its load when it changes, up to 10 times a second) recorded as a
   heartbeat, and every admission (a request the worker took in, from whichever gateway) recorded as
   pending entries for the chunks it will compute plus a heartbeat with its load;
3. meanwhile ``Stats`` every ``poll_s`` -> ``index.heartbeat`` with the load.

A session ends on a refused write (GAP, unknown worker: a new session resubscribes and resyncs from the
new snapshot), on a new epoch seen in ``Stats`` (the worker restarted: re-register), or when the worker
cannot be reached or its stream ends (its incarnation is over): then that incarnation and all it held
are dropped from the index at once (its holdings are unknown; ``deregister``, fenced by epoch) and
reconnection is retried with capped backoff.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass

import grpc

from kvgate.common.clock import Clock, SystemClock
from kvgate.common.grpc_options import CLIENT_OPTIONS
from kvgate.common.grpc_tls import ChannelSecurity, TlsFiles
from kvgate.index.admission import admission_wait_s
from kvgate.index.base import PrefixIndex
from kvgate.index.rebase import clock_offset_ms, rebase_batch, rebase_snapshot
from kvgate.index.types import ApplyResult, IndexUnavailableError, StaleEpochError
from kvgate.proto import convert, worker_pb2, worker_pb2_grpc
from kvgate.proto.events import Admission
from kvgate.proto.ids import WorkerId
from kvgate.proto.workers import WorkerInfo, WorkerLoad

log = logging.getLogger(__name__)


class _ResubscribeError(Exception):
    """The session must start over (refused write, new epoch); the worker itself is fine."""


class _WorkerLostError(Exception):
    """The worker's event stream ended: its incarnation is over."""


@dataclass(slots=True)
class FeedState:
    """What the feed knows of one address: the incarnation last registered from it (None before the
    first ``Stats``), whether its holdings are in the index now, and sessions started so far."""

    info: WorkerInfo | None = None
    synced: bool = False
    sessions: int = 0
    offset_ms: int = 0  # this gateway's clock minus the worker's (rebases event expiries)


class EventFeed:
    """Owned by the gateway's composition root (embedded mode). :meth:`follow` starts one owner task
    per address; :meth:`unfollow` and :meth:`close` cancel them and deregister their workers.

    ``poll_s``: the Stats (heartbeat) period, well under the index's ``heartbeat_ttl_s``; ``retry_s``:
    (first, most) seconds between reconnection attempts; ``rpc_timeout_s`` bounds each Stats call;
    ``tls``: the workers' TLS (None: plaintext); ``secret``: the deployment secret, whose call token
    the feed presents to the workers (empty: none); ``clock``: the index's clock, onto which the
    workers' expiry times are rebased (each worker's offset measured by its ``Stats`` calls).
    """

    def __init__(
        self,
        index: PrefixIndex,
        *,
        poll_s: float = 1.0,
        retry_s: tuple[float, float] = (0.1, 5.0),
        rpc_timeout_s: float = 5.0,
        options: tuple[tuple[str, int], ...] = CLIENT_OPTIONS,
        tls: TlsFiles | None = None,
        secret: bytes = b"",
        clock: Clock | None = None,
        prefill_tokens_per_s: float = 0.0,
    ) -> None:
        self._index = index
        self._prefill_tokens_per_s = prefill_tokens_per_s
        self._clock = clock or SystemClock()
        self._poll_s, self._retry_s, self._rpc_timeout_s = poll_s, retry_s, rpc_timeout_s
        self._options = options
        self._security = ChannelSecurity.of(tls, secret)  # reads the TLS files now, not per connection
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self.states: dict[str, FeedState] = {}

    @property
    def addresses(self) -> list[str]:
        return sorted(self._tasks)

    def follow(self, address: str) -> None:
        """Starts following the worker at ``address`` (``host:port``). Idempotent."""
        if address not in self._tasks:
            self.states[address] = FeedState()
            self._tasks[address] = asyncio.create_task(self._follow(address), name=f"kvgate-feed-{address}")

    async def unfollow(self, address: str) -> None:
        """Stops following ``address`` and deregisters its worker (it is gone for good)."""
        task = self._tasks.pop(address, None)
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        state = self.states.pop(address, None)
        if state is not None and state.info is not None:
            with contextlib.suppress(IndexUnavailableError):
                await self._index.deregister(state.info.worker_id, state.info.epoch)

    async def resubscribe(self, worker_id: WorkerId) -> None:
        """Starts a fresh session with ``worker_id`` (its holdings were dropped here, after a failed
        call: the new session's snapshot restores them if the worker is fine). No-op if not followed."""
        for address, state in list(self.states.items()):
            if state.info is not None and state.info.worker_id == worker_id:
                await self.unfollow(address)
                self.follow(address)

    async def close(self) -> None:
        """Stops following every address. Idempotent."""
        for address in list(self._tasks):
            await self.unfollow(address)

    # -- one owner task per address ---------------------------------------------------------------

    async def _follow(self, address: str) -> None:
        state = self.states[address]
        delay = self._retry_s[0]
        async with self._security.open(address, self._options) as channel:
            stub = worker_pb2_grpc.KVWorkerStub(channel)
            while True:
                state.sessions += 1
                try:
                    await self._session(stub, state)
                except _ResubscribeError as exc:
                    log.info("worker at %s: resubscribing (%s)", address, exc)
                except (grpc.aio.AioRpcError, _WorkerLostError, ValueError, IndexUnavailableError) as exc:
                    await self._lost(address, state, exc)
                except Exception as exc:  # a bug: keep the owner task alive, but say so loudly
                    log.exception("event feed of %s failed unexpectedly", address)
                    await self._lost(address, state, exc)
                delay = self._retry_s[0] if state.synced else min(delay * 2, self._retry_s[1])
                state.synced = False
                await asyncio.sleep(delay)

    async def _session(self, stub: worker_pb2_grpc.KVWorkerStub, state: FeedState) -> None:
        """Registers the worker and runs its event stream and heartbeats until either fails."""
        info, load = await self._stats(stub, state)
        await self._register(info, load)
        state.info = info
        call = stub.SubscribeEvents(worker_pb2.SubscribeEventsRequest(admissions=True))
        tasks = [
            asyncio.create_task(self._consume(call, state)),
            asyncio.create_task(self._heartbeats(stub, info, state)),
        ]
        try:
            done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
            for task in done:
                task.result()  # re-raises why the session ended
        finally:
            call.cancel()
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    async def _consume(self, call: grpc.aio.UnaryStreamCall, state: FeedState) -> None:
        async for msg in call:
            if msg.HasField("snapshot"):
                snapshot = convert.snapshot_from_proto(msg.snapshot)
                _check(await self._index.resync(rebase_snapshot(snapshot, state.offset_ms)))
                state.synced = True
            elif msg.HasField("load"):  # pushed when it changes (up to 10 Hz): fresher than Stats
                await self._beat(state, convert.worker_load_from_proto(msg.load))
            elif msg.HasField("admission"):
                await self._admitted(convert.admission_from_proto(msg.admission), state)
            else:
                batch = convert.event_batch_from_proto(msg.batch)
                _check(await self._index.apply(rebase_batch(batch, state.offset_ms)))
        raise _WorkerLostError("the worker ended its event stream")

    async def _beat(self, state: FeedState, load: WorkerLoad) -> None:
        info = state.info
        if info is not None and not await self._index.heartbeat(info.worker_id, info.epoch, load):
            raise _ResubscribeError(f"the index no longer knows {info.worker_id}")

    async def _admitted(self, admission: Admission, state: FeedState) -> None:
        """The worker took a request in: its chunks are pending there until the prefill queue the
        admission reports is done (:func:`admission_wait_s`), its load is the admission's. An
        admission naming another incarnation than this session's is ignored."""
        info = state.info
        if info is None or (admission.worker_id, admission.epoch) != (info.worker_id, info.epoch):
            log.debug("ignoring an admission of %s epoch %d", admission.worker_id, admission.epoch)
            return
        if admission.pending:
            wait_s = admission_wait_s(admission.load, self._prefill_tokens_per_s)
            await self._index.add_pending(admission.pending, info.worker_id, wait_s)
        await self._beat(state, admission.load)

    async def _heartbeats(
        self, stub: worker_pb2_grpc.KVWorkerStub, registered: WorkerInfo, state: FeedState
    ) -> None:
        while True:
            await asyncio.sleep(self._poll_s)
            info, load = await self._stats(stub, state)
            if (info.worker_id, info.epoch) != (registered.worker_id, registered.epoch):
                raise _ResubscribeError(f"{info.worker_id} epoch {info.epoch} replaced {registered.epoch}")
            if not await self._index.heartbeat(info.worker_id, info.epoch, load):
                raise _ResubscribeError(f"the index no longer knows {info.worker_id}")

    async def _stats(
        self, stub: worker_pb2_grpc.KVWorkerStub, state: FeedState
    ) -> tuple[WorkerInfo, WorkerLoad]:
        """The worker's record and load; also measures the worker's clock against this gateway's
        (the first measurement of a session holds for its events: a snapshot and its batches
        must share one offset)."""
        sent = self._clock.now_ms()
        reply = await stub.Stats(worker_pb2.StatsRequest(), timeout=self._rpc_timeout_s)
        if not state.synced:
            state.offset_ms = clock_offset_ms(sent, self._clock.now_ms(), reply.now_ms)
        return convert.worker_info_from_proto(reply.info), convert.worker_load_from_proto(reply.load)

    async def _register(self, info: WorkerInfo, load: WorkerLoad) -> None:
        try:
            await self._index.register(info, load)
        except StaleEpochError as exc:
            raise _ResubscribeError(str(exc)) from exc  # an older incarnation still answering: wait

    async def _lost(self, address: str, state: FeedState, exc: Exception) -> None:
        """The worker is unreachable or its incarnation ended: drop it and all it held from the index.

        Fenced by epoch (``deregister``, not ``purge``): a worker restarted elsewhere under a new epoch
        and followed at its new address must not lose its entry to the old address's feed."""
        level = logging.WARNING if state.synced else logging.DEBUG  # once per loss, not per retry
        log.log(level, "worker at %s lost (%s); dropping it and reconnecting", address, _describe(exc))
        if state.info is not None:
            with contextlib.suppress(IndexUnavailableError):
                await self._index.deregister(state.info.worker_id, state.info.epoch)
            state.info = None


def _check(result: ApplyResult) -> None:
    if not result.ok:
        raise _ResubscribeError(f"the index answered {result.status.value}")


def _describe(exc: Exception) -> str:
    if isinstance(exc, grpc.aio.AioRpcError):
        return f"{exc.code().name}: {exc.details()}"
    return repr(exc)
