"""``WorkerPool``: places the worker actors and keeps each one started across Ray's restarts.

One supervisor task per slot calls the actor's idempotent ``start`` every ``poll_s``: the first call
loads the model; after Ray restarted the actor (a crash, a broken engine), the next call starts the new
incarnation, and its new registration record (new epoch, maybe a new address) is passed to
``on_change``: embedded mode re-follows the worker's event stream there.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import ray
from ray.exceptions import RayError, RayTaskError

from kvgate.cluster.progress import say
from kvgate.cluster.worker_specs import Placement
from kvgate.proto.workers import WorkerInfo
from kvgate.workers.ray_actor import ActorSpec, WorkerActor

log = logging.getLogger(__name__)

OnChange = Callable[[WorkerInfo | None, WorkerInfo], Awaitable[None]]
STOP_TIMEOUT_S = 15.0


@dataclass(slots=True)
class Slot:
    """One worker slot: its actor handle, whether Ray has started its process (``process_up``),
    the incarnation last seen started (None before), and the error of its last failed start
    (cleared by a success)."""

    spec: ActorSpec
    actor: Any
    info: WorkerInfo | None = None
    error: BaseException | None = None
    process_up: bool = False


class WorkerPool:
    """Owned by the cluster stack: :meth:`place` once, :meth:`wait_ready`, then :meth:`stop` once
    (which ends the supervisors and kills the actors for good)."""

    def __init__(self, on_change: OnChange | None = None, *, poll_s: float = 1.0) -> None:
        self._on_change = on_change
        self._poll_s = poll_s
        self.slots: list[Slot] = []
        self._tasks: list[asyncio.Task[None]] = []

    def place(self, specs: list[ActorSpec], placement: Placement, max_restarts: int = -1) -> None:
        """Creates one actor per spec (non-blocking: Ray places them) and starts their supervisors."""
        actor_class = ray.remote(WorkerActor).options(**placement.ray_options(max_restarts))
        for spec in specs:
            slot = Slot(spec, actor_class.remote(spec))
            self.slots.append(slot)
            name = f"kvgate-supervise-{spec.config.worker_id}"
            self._tasks.append(asyncio.create_task(self._supervise(slot), name=name))

    async def wait_ready(self, timeout_s: float, report_s: float = 5.0) -> list[WorkerInfo]:
        """Waits until every slot has started once, saying on stderr how many are still loading.
        Raises RuntimeError when a slot failed to start before ever being ready, TimeoutError after
        ``timeout_s``."""
        began = time.monotonic()
        next_report = began + report_s
        while not all(s.info for s in self.slots):
            failed = [s for s in self.slots if s.info is None and s.error is not None]
            if failed:
                raise RuntimeError(f"{failed[0].spec.config.worker_id} failed to start: {failed[0].error}")
            now = time.monotonic()
            if now - began > timeout_s:
                raise TimeoutError(f"workers not ready after {timeout_s:.0f} s")
            if now >= next_report:
                say(f"{self._progress()} ({now - began:.0f} s; {self._stages()})")
                next_report = now + report_s
            await asyncio.sleep(0.1)
        return [s.info for s in self.slots if s.info is not None]

    def _progress(self) -> str:
        return f"{sum(1 for s in self.slots if s.info)}/{len(self.slots)} workers ready"

    def _stages(self) -> str:
        """Where the slots not ready yet are: waiting for Ray to start their process (on a busy
        machine Ray's start and each process's imports take most of a minute), or loading the model."""
        waiting = [s for s in self.slots if s.info is None]
        starting = sum(1 for s in waiting if not s.process_up)
        loading = len(waiting) - starting
        stages = [f"{starting} starting their process"] if starting else []
        return ", ".join(stages + ([f"{loading} loading the model"] if loading else []))

    async def stop(self) -> None:
        """Ends the supervisors, stops every worker (bounded), then kills the actors without restart.
        Idempotent."""
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks.clear()
        await asyncio.gather(*(self._stop_one(slot) for slot in self.slots))
        for slot in self.slots:
            with contextlib.suppress(RayError, ValueError):
                ray.kill(slot.actor, no_restart=True)
        self.slots.clear()

    async def _stop_one(self, slot: Slot) -> None:
        try:
            await asyncio.wait_for(slot.actor.stop.remote(), STOP_TIMEOUT_S)
        except (RayError, TimeoutError) as exc:
            log.warning("%s did not stop cleanly: %r", slot.spec.config.worker_id, exc)

    async def _supervise(self, slot: Slot) -> None:
        while True:
            try:
                if not slot.process_up:  # info() answers (None) once Ray has started the process
                    await slot.actor.info.remote()
                    slot.process_up = True
                info = await slot.actor.start.remote()
                slot.error = None
            except RayTaskError as exc:  # the start itself failed (e.g. the model did not load)
                slot.error = exc.cause if exc.cause is not None else exc
                log.error("%s failed to start: %s", slot.spec.config.worker_id, slot.error)
            except RayError as exc:  # dead or restarting: Ray brings it back, the next call starts it
                slot.process_up = False  # asked again: its new process answers info() once Ray started it
                log.debug("%s unavailable: %r", slot.spec.config.worker_id, exc)
            else:
                await self._seen(slot, info)
            await asyncio.sleep(self._poll_s)

    async def _seen(self, slot: Slot, info: WorkerInfo) -> None:
        if slot.info is not None and (info.worker_id, info.epoch) == (slot.info.worker_id, slot.info.epoch):
            return
        old, slot.info = slot.info, info
        verb = "up" if old is None else "restarted"
        say(f"worker {info.worker_id} {verb} at {info.address} (epoch {info.epoch})")
        if self._on_change is not None:
            await self._on_change(old, info)
