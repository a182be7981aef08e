"""Ctrl-C and SIGTERM as an :class:`asyncio.Event`: the first one asks for a clean stop, a second
Ctrl-C interrupts at once (the default handler is back)."""

from __future__ import annotations

import asyncio
import signal
from typing import TypeVar

from kvgate.cluster.progress import say

T = TypeVar("T")
SIGNALS = (signal.SIGINT, signal.SIGTERM)


def stop_on_signals() -> asyncio.Event:
    """Must run in the event loop's (main) thread. Returns the event that the first signal sets."""
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()

    def first(sig: signal.Signals) -> None:
        say(f"{sig.name}: stopping (again to interrupt at once)")
        for s in SIGNALS:
            loop.remove_signal_handler(s)
        stop.set()

    for sig in SIGNALS:
        loop.add_signal_handler(sig, first, sig)
    return stop


async def unless_stopped(stop: asyncio.Event, work: asyncio.Future[T] | asyncio.Task[T]) -> T | None:
    """``work``'s result, or None (``work`` cancelled) when ``stop`` is set first."""
    stopped = asyncio.ensure_future(stop.wait())
    try:
        await asyncio.wait([work, stopped], return_when=asyncio.FIRST_COMPLETED)
    finally:
        stopped.cancel()
    if work.done():
        return work.result()
    work.cancel()
    await asyncio.gather(work, return_exceptions=True)
    return None
