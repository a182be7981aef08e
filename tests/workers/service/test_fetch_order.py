"""Requests reach the engine in arrival order around KV fetches."""

from __future__ import annotations

import asyncio

from kvgate.workers.service.fetch_order import FetchOrder


async def test_a_request_arriving_during_a_fetch_waits_for_it() -> None:
    order, gate, started, log = FetchOrder(), asyncio.Event(), asyncio.Event(), []

    async def fetch() -> None:
        started.set()
        await gate.wait()
        log.append("fetched")

    async def fetching_request() -> None:
        await order.wait(order.arrived(), fetch())
        log.append("first submitted")

    async def later_request() -> None:
        await order.wait(order.arrived(), None)
        log.append("second submitted")

    first = asyncio.create_task(fetching_request())
    await started.wait()
    second = asyncio.create_task(later_request())
    for _ in range(20):
        await asyncio.sleep(0)
    assert log == []  # the later request is held behind the running fetch
    gate.set()
    await asyncio.gather(first, second)
    assert log[0] == "fetched"
    assert set(log[1:]) == {"first submitted", "second submitted"}
    assert order.running == 0


async def test_a_request_arriving_when_no_fetch_runs_waits_for_nothing() -> None:
    order = FetchOrder()
    await asyncio.wait_for(order.wait(order.arrived(), None), timeout=5)


async def test_a_failed_or_cancelled_earlier_fetch_never_fails_a_waiter() -> None:
    order, started, go = FetchOrder(), asyncio.Event(), asyncio.Event()

    async def broken() -> None:
        started.set()
        await go.wait()
        raise RuntimeError("holder gone")

    fetcher = asyncio.create_task(order.wait((), broken()))
    await started.wait()
    later = order.arrived()
    go.set()
    assert later  # the broken fetch was running when the later request arrived
    await asyncio.wait_for(order.wait(later, None), timeout=5)  # no error here
    await asyncio.gather(fetcher, return_exceptions=True)
    assert isinstance(fetcher.exception(), RuntimeError)


async def test_cancelling_a_fetching_request_cancels_its_fetch() -> None:
    order, started = FetchOrder(), asyncio.Event()

    async def endless() -> None:
        started.set()
        await asyncio.Event().wait()

    request = asyncio.create_task(order.wait((), endless()))
    await started.wait()
    request.cancel()
    await asyncio.gather(request, return_exceptions=True)
    for _ in range(5):
        await asyncio.sleep(0)
    assert order.running == 0
