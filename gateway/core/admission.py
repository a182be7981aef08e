"""The gateway's own bound on work in flight: past ``limit`` generations at once, new ones are refused
at once (OVERLOADED, with a retry hint) instead of queueing without bound.

Workers bound their queues too (RESOURCE_EXHAUSTED, tried elsewhere, then WORKERS_BUSY); this gate
protects the gateway itself (memory, tokenization threads, event loop) when clients send faster than
the whole cluster drains. One gate per gateway, shared by its fronts.
"""

from __future__ import annotations

import asyncio

from kvgate.gateway.errors import ErrorKind, GatewayError

RETRY_AFTER_S = 1.0


class InFlightGate:
    """A counter with a limit; event-loop only. ``refused`` counts refusals (for metrics and tests)."""

    def __init__(self, limit: int) -> None:
        if limit < 1:
            raise ValueError("limit must be >= 1")
        self.limit = limit
        self.in_flight = 0
        self.refused = 0
        self._idle = asyncio.Event()
        self._idle.set()

    def try_enter(self) -> bool:
        if self.in_flight >= self.limit:
            self.refused += 1
            return False
        self.in_flight += 1
        self._idle.clear()
        return True

    def leave(self) -> None:
        self.in_flight -= 1
        if self.in_flight == 0:
            self._idle.set()

    async def drained(self) -> None:
        """Returns once no generation is in flight (at once when none is)."""
        await self._idle.wait()

    def overloaded(self) -> GatewayError:
        message = f"The gateway is handling {self.limit} requests, its limit; retry shortly."
        return GatewayError(message, ErrorKind.OVERLOADED, code="overloaded", retry_after_s=RETRY_AFTER_S)
