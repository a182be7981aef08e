"""The worker directory's discovery loop never ends on a failure, and says when its list is stale."""

from __future__ import annotations

import asyncio

from kvgate.gateway.upstream.directory import WorkerDirectory
from kvgate.index.types import IndexUnavailableError, WorkerStatus
from tests.index.helpers import LOAD, A, info
from tests.support.fake_clock import FakeMonotonic


class FlakyIndex:
    """Answers ``workers()`` from a script: a list, or an exception to raise."""

    def __init__(self, *script: list[WorkerStatus] | Exception) -> None:
        self.script = list(script)
        self.calls = 0

    async def workers(self) -> list[WorkerStatus]:
        self.calls += 1
        step = self.script[min(self.calls, len(self.script)) - 1]
        if isinstance(step, Exception):
            raise step
        return step


async def test_an_unexpected_failure_does_not_end_discovery() -> None:
    status = WorkerStatus(info(A), LOAD, 10**12, 10**12 - 10_000)
    index = FlakyIndex(RuntimeError("a bug in a backend"), [status])
    directory = WorkerDirectory(index, info(A).fingerprint, refresh_s=0.01)  # type: ignore[arg-type]
    task = asyncio.create_task(directory.run())
    try:
        for _ in range(500):
            if directory.known():
                break
            await asyncio.sleep(0.01)
    finally:
        task.cancel()
    assert [w.info.worker_id for w in directory.known()] == [A]
    assert index.calls >= 2


async def test_the_list_is_stale_after_several_periods_without_a_refresh() -> None:
    clock = FakeMonotonic(100.0)
    index = FlakyIndex([], IndexUnavailableError("redis is down"))
    directory = WorkerDirectory(index, "f" * 32, refresh_s=1.0, monotonic=clock)  # type: ignore[arg-type]
    await directory.refresh()
    clock.now += 4.0
    assert not directory.stale
    await directory.refresh()  # fails: the index is down
    clock.now += 2.0
    assert directory.degraded
    assert directory.stale
