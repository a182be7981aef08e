"""Requests reach the engine in arrival order around KV fetches.

A request whose ``kv_source`` is fetched waits for its fetch before it is submitted; a request that
arrives meanwhile waits for that fetch too (and for any other fetch already running when it arrived),
as it would queue behind the fetching request in the engine's FIFO. Without that, the later request
-- often a follow-up the router sent here *because* the fetch makes this worker a holder -- would
start first and compute the very prefix being fetched. Each fetch is bounded by its timeout, so a
wait is too; a request that arrives when no fetch runs waits for nothing.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable


class FetchOrder:
    """The fetches in flight on one worker (owned by its servicer)."""

    def __init__(self) -> None:
        self._running: set[asyncio.Task[None]] = set()

    @property
    def running(self) -> int:
        return len(self._running)

    def arrived(self) -> tuple[asyncio.Task[None], ...]:
        """The fetches a request that arrives now must wait for (call it on arrival)."""
        return tuple(self._running)

    async def wait(self, earlier: tuple[asyncio.Task[None], ...], fetch: Awaitable[None] | None) -> None:
        """Runs ``fetch`` (None: none), counted as running so later arrivals wait for it, then waits
        for the ``earlier`` fetches (from :meth:`arrived`). A failed fetch is the fetcher's to report;
        it never fails a waiter. Cancelling the caller cancels its own fetch, not the earlier ones."""
        if fetch is not None:
            task = asyncio.ensure_future(fetch)
            self._running.add(task)
            task.add_done_callback(self._running.discard)
            await task
        pending = [t for t in earlier if not t.done()]
        if pending:
            await asyncio.wait(pending)
