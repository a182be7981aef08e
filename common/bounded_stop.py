"""``stop_within``: one shutdown step that may not hold up the rest of the shutdown.

A stop sequence (deregister, stop the gRPC server, end a task) must end even when one step hangs on
a peer or a library; each step is given a deadline, and one that overruns it is cancelled, logged by
name, and left behind while the sequence goes on.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable

log = logging.getLogger(__name__)


async def stop_within(step: str, work: Awaitable[object], timeout_s: float) -> bool:
    """Awaits ``work`` for at most ``timeout_s`` seconds; True when it finished in time (its
    exception, if any, propagates). Past the deadline it is cancelled, given one more second to
    unwind, logged as ``step`` and abandoned: False. Cancelling the caller cancels ``work`` too."""
    task = asyncio.ensure_future(work)
    try:
        done, _ = await asyncio.wait({task}, timeout=timeout_s)
    except asyncio.CancelledError:
        task.cancel()
        raise
    if done:
        task.result()
        return True
    task.cancel()
    await asyncio.wait({task}, timeout=1.0)
    if task.done() and not task.cancelled():
        task.exception()  # retrieved: it ended with an error while being cancelled
    log.warning("shutdown: %s did not finish within %.1f s; going on without it", step, timeout_s)
    return False
