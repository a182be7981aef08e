"""``kvgate up``'s progress while its workers start (``WorkerPool``): each slot not ready yet is
said to be waiting for Ray to start its process, then loading the model, so a person watching a
busy machine sees which of the two takes the time (a process Ray had to start again included)."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest
from ray.exceptions import RayActorError

from kvgate.cluster.worker_pool import Slot, WorkerPool
from kvgate.proto.workers import WorkerInfo
from tests.workers.service.helpers import eventually


class _Method:
    def __init__(self, body: Any) -> None:
        self._body = body

    def remote(self) -> Any:
        return self._body()


class _Actor:
    """An actor whose process is built when ``built`` is set and whose model is loaded when
    ``loaded`` is, as Ray's handle is called (``actor.method.remote()`` awaited)."""

    def __init__(self, worker_id: str, dies_first: bool = False, dies_loading: bool = False) -> None:
        self.built, self.loaded = asyncio.Event(), asyncio.Event()
        self._dies_first = dies_first  # its first process dies before it answers (Ray restarts it)
        self._dies_loading = dies_loading  # its first process dies while loading the model
        info = WorkerInfo(worker_id, 1, "127.0.0.1:1", "layout", "tiny")
        self.info = _Method(self._ready)
        self.start = _Method(lambda: self._start(info))

    async def _ready(self) -> None:
        if self._dies_first:
            self._dies_first = False
            raise RayActorError()
        await self.built.wait()  # no registration record before start

    async def _start(self, info: WorkerInfo) -> WorkerInfo:
        if self._dies_loading:
            self._dies_loading = False
            self.built.clear()  # Ray starts a new process, not built yet
            raise RayActorError()
        await self.loaded.wait()
        return info


async def _said(pool: WorkerPool, capsys: pytest.CaptureFixture[str]) -> str:
    """The last progress line ``wait_ready`` writes while the slots stay as they are."""
    with pytest.raises(TimeoutError):
        await pool.wait_ready(timeout_s=0.2, report_s=0.05)
    return capsys.readouterr().err.strip().splitlines()[-1]


async def test_progress_says_which_slots_wait_for_a_process_and_which_load(
    capsys: pytest.CaptureFixture[str],
) -> None:
    pool = WorkerPool(poll_s=0.01)
    actors = [_Actor("worker-0"), _Actor("worker-1", dies_first=True)]
    spec = SimpleNamespace(config=SimpleNamespace(worker_id="w"))
    pool.slots = [Slot(spec, actor) for actor in actors]  # type: ignore[arg-type]
    tasks = [asyncio.create_task(pool._supervise(slot)) for slot in pool.slots]
    try:
        assert (await _said(pool, capsys)).endswith("s; 2 starting their process)")
        actors[0].built.set()
        await eventually(lambda: pool.slots[0].process_up)
        assert (await _said(pool, capsys)).endswith("s; 1 starting their process, 1 loading the model)")
        actors[1].built.set()
        actors[0].loaded.set()
        await eventually(lambda: pool.slots[0].info is not None and pool.slots[1].process_up)
        line = await _said(pool, capsys)
        assert line.startswith("kvgate: 1/2 workers ready (")
        assert line.endswith("s; 1 loading the model)")
        actors[1].loaded.set()
        ready = await pool.wait_ready(timeout_s=30)
        assert [info.worker_id for info in ready] == ["worker-0", "worker-1"]
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


async def test_a_process_that_dies_while_loading_is_said_to_start_again(
    capsys: pytest.CaptureFixture[str],
) -> None:
    pool = WorkerPool(poll_s=0.01)
    actor = _Actor("worker-0", dies_loading=True)
    actor.built.set()
    spec = SimpleNamespace(config=SimpleNamespace(worker_id="w"))
    pool.slots = [Slot(spec, actor)]  # type: ignore[arg-type]
    task = asyncio.create_task(pool._supervise(pool.slots[0]))
    try:
        await eventually(lambda: not actor._dies_loading)  # the first process died loading
        assert (await _said(pool, capsys)).endswith("s; 1 starting their process)")
        actor.built.set()
        await eventually(lambda: pool.slots[0].process_up)
        assert (await _said(pool, capsys)).endswith("s; 1 loading the model)")
        actor.loaded.set()
        assert [info.worker_id for info in await pool.wait_ready(timeout_s=30)] == ["worker-0"]
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
