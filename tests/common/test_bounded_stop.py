"""``stop_within``: a shutdown step ends in time, or is abandoned after its deadline, never hangs."""

from __future__ import annotations

import asyncio
import logging

import pytest

from kvgate.common.bounded_stop import stop_within


async def _deaf(released: asyncio.Event) -> None:
    """A step that ignores cancellation (as a misbehaving library might) until ``released``."""
    while not released.is_set():
        try:
            await released.wait()
        except asyncio.CancelledError:
            continue


async def test_a_step_that_finishes_in_time_is_awaited() -> None:
    finished = []

    async def step() -> None:
        await asyncio.sleep(0)
        finished.append(True)

    assert await stop_within("quick", step(), 5.0) is True
    assert finished == [True]


async def test_a_step_that_ignores_cancellation_is_abandoned_after_its_deadline(
    caplog: pytest.LogCaptureFixture,
) -> None:
    released = asyncio.Event()
    task = asyncio.create_task(_deaf(released))
    with caplog.at_level(logging.WARNING):
        assert await stop_within("the deaf step", task, 0.05) is False
    assert "the deaf step did not finish within 0.1 s" in caplog.text
    assert not task.done()  # left behind, still running: the shutdown went on without it
    released.set()
    await task


async def test_a_step_that_hangs_is_cancelled() -> None:
    hang = asyncio.Event()
    task = asyncio.ensure_future(hang.wait())
    assert await stop_within("waiting", task, 0.05) is False
    assert task.cancelled()


async def test_the_step_error_propagates() -> None:
    async def broken() -> None:
        raise ValueError("no")

    with pytest.raises(ValueError, match="no"):
        await stop_within("broken", broken(), 5.0)


async def test_cancelling_the_caller_cancels_the_step() -> None:
    hang = asyncio.Event()
    step = asyncio.ensure_future(hang.wait())
    caller = asyncio.create_task(stop_within("waiting", step, 60.0))
    await asyncio.sleep(0)
    caller.cancel()
    with pytest.raises(asyncio.CancelledError):
        await caller
    await asyncio.sleep(0)
    assert step.cancelled()
