"""The HTTP server the gateway runs on: uvicorn's h11 protocol with a header timeout.

uvicorn closes a connection that idles between requests (keep-alive), but it waits forever for the
headers of a request: a client that opens connections and sends their headers a byte at a time (or
nothing at all) holds them open for as long as it likes. :class:`_GuardedH11` closes a connection whose
request headers are not complete ``header_s`` after its first byte, or after the connection opened.

Likewise a request answered before its body was complete (a 413, a 408, a 401 or 429 refused from the
headers): uvicorn would keep reading and discarding the rest of the body for as long as it trickles
in. The connection lingers :data:`LINGER_S` (so that a client still sending reads the answer instead
of a reset) and is then closed.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import h11
import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

from kvgate.gateway.settings import HttpTimeouts

log = logging.getLogger(__name__)
LINGER_S = 2.0


class _GuardedH11(H11Protocol):
    """h11 with a deadline on each request's headers (``header_s``, set per server by :func:`_guarded`)."""

    header_s: float = 10.0

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._header_timer: asyncio.TimerHandle | None = None
        self._linger_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm()

    def data_received(self, data: bytes) -> None:
        if self._header_timer is None and self.conn.their_state is h11.IDLE:
            self._arm()  # a new request on a kept-alive connection: its headers get their own time
        super().data_received(data)
        if self.conn.their_state is not h11.IDLE:
            self._disarm()  # the headers are complete

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if self.conn.their_state is h11.SEND_BODY and self._linger_timer is None:  # answered mid-body
            self._linger_timer = self.loop.call_later(LINGER_S, self._close)

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        if self._linger_timer is not None:
            self._linger_timer.cancel()
        super().connection_lost(exc)

    def _arm(self) -> None:
        self._header_timer = self.loop.call_later(self.header_s, self._headers_too_slow)

    def _disarm(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _headers_too_slow(self) -> None:
        self._header_timer = None
        log.debug("closing a connection whose request headers took over %.1f s", self.header_s)
        self._close()

    def _close(self) -> None:
        if not self.transport.is_closing():
            self.transport.close()


def _guarded(header_s: float) -> type[_GuardedH11]:
    return type("GuardedH11", (_GuardedH11,), {"header_s": header_s})


def http_config(app: Any, host: str, port: int, timeouts: HttpTimeouts, **options: Any) -> uvicorn.Config:
    """The uvicorn configuration of a gateway's HTTP front: its timeouts, h11 with the header
    deadline, and ``options`` (``log_level``, ``lifespan``, ...)."""
    return uvicorn.Config(
        app, host=host, port=port, http=_guarded(timeouts.header_s),
        timeout_keep_alive=timeouts.keep_alive_s, **options,
    )  # fmt: skip
