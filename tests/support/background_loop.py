"""An asyncio event loop on its own thread, for synchronous tests that drive async servers
(schemathesis calls the API with blocking requests, so the servers cannot share the test's thread)."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Coroutine, Iterator
from typing import Any, TypeVar

T = TypeVar("T")


class BackgroundLoop:
    """Runs coroutines on a loop that keeps running (with the tasks they start) between calls."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop

    def run(self, coroutine: Coroutine[Any, Any, T], timeout_s: float = 60.0) -> T:
        """Blocks until ``coroutine`` has finished on the loop; returns its result or raises."""
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result(timeout_s)


@contextlib.contextmanager
def background_loop() -> Iterator[BackgroundLoop]:
    """A running loop on a daemon thread; stopped and closed on exit (run your cleanup first)."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name="background-loop", daemon=True)
    thread.start()
    try:
        yield BackgroundLoop(loop)
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()
