"""Checks a command makes before it starts Ray or loads a model, so that what cannot work fails in a
second with one line saying what to do, not after the workers loaded (or, worse, not at all):

- :func:`check_ports`: the gateway's HTTP and gRPC ports are free on its interface;
- :func:`check_redis`: the shared index's Redis answers, as Redis.

Each raises :class:`StartupError` (a ValueError: the CLI prints it as ``kvgate <command>: error: ...``
and exits 2). A check passed is no promise: a port can be taken, Redis can stop, a moment later.
"""

from __future__ import annotations

import asyncio
import errno
import socket

from kvgate.index.connect import close_redis, open_redis
from kvgate.index.redis_url import RedisUrlError
from kvgate.index.types import IndexUnavailableError

REDIS_TIMEOUT_S = 2.0  # per attempt
REDIS_WAIT_S = 5.0  # a Redis started with kvgate (compose, a script) may take a moment to listen


class StartupError(ValueError):
    """A command cannot start as configured; the message says why and what to change."""


def check_ports(host: str, ports: dict[str, tuple[int, str]]) -> None:
    """For each ``label: (port, flag)`` with a port other than 0, binds ``host:port`` and lets it go
    again (SO_REUSEADDR, as the servers themselves bind). Raises StartupError naming the first port
    that is in use or cannot be bound, and the flag that moves it."""
    for label, (port, flag) in ports.items():
        if port:
            _check_port(host, port, label, flag)


def _check_port(host: str, port: int, label: str, flag: str) -> None:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError as exc:
            reason = (
                "is already in use" if exc.errno == errno.EADDRINUSE else f"cannot be bound ({exc.strerror})"
            )
            raise StartupError(
                f"the {label} port {host}:{port} {reason}; "
                f"stop what listens there or choose another with {flag}"
            ) from None


def check_redis(url: str, *, wait_s: float = REDIS_WAIT_S) -> None:
    """Blocking (call before any event loop). Opens and closes a client for ``url``, retrying for up
    to ``wait_s``; raises StartupError naming the URL (password masked) and the cause when the URL is
    malformed, or nothing there answers as Redis does by then."""
    try:
        asyncio.run(_probe(url, wait_s))
    except RedisUrlError as exc:
        raise StartupError(f"--redis-url {exc}") from None
    except IndexUnavailableError as exc:
        raise StartupError(
            f"{str(exc).rstrip('.')}; start Redis there, point --redis-url (or $KVGATE_REDIS_URL) at one "
            "that answers, or leave both out to run with the index embedded in this process"
        ) from None


async def _probe(url: str, wait_s: float) -> None:
    deadline = asyncio.get_running_loop().time() + wait_s
    while True:
        try:
            client = await open_redis(url, timeout_s=REDIS_TIMEOUT_S)
        except IndexUnavailableError:
            if asyncio.get_running_loop().time() >= deadline:
                raise
            await asyncio.sleep(0.5)
        else:
            await close_redis(client, REDIS_TIMEOUT_S)
            return
