"""Serving a built gateway: HTTP (uvicorn) and gRPC in one event loop, until told to stop."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from dataclasses import dataclass

import uvicorn

from kvgate.gateway.compose import Gateway
from kvgate.gateway.grpc_api.server import build_grpc_server
from kvgate.gateway.http_api.server import http_config

START_TIMEOUT_S = 30.0


class _Server(uvicorn.Server):
    """uvicorn without its own signal handling: the process's owner decides when to stop."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


@dataclass(frozen=True, slots=True)
class Listening:
    """Where the gateway listens (the bound ports, when 0 was asked)."""

    host: str
    port: int
    grpc_port: int

    @property
    def base_url(self) -> str:
        host = "127.0.0.1" if self.host in ("0.0.0.0", "") else self.host
        return f"http://{host}:{self.port}/v1"


async def serve_gateway(
    gateway: Gateway, host: str, port: int, grpc_port: int, stop: asyncio.Event,
    ready: asyncio.Future[Listening] | None = None,
) -> None:  # fmt: skip
    """Serves until ``stop`` is set, then shuts both fronts down (the HTTP app's lifespan included):
    they take no new request, and those in flight, gRPC streams included, have the gateway's
    ``shutdown_grace_s`` to finish. ``ready`` (if given) receives the bound addresses once both
    listen; start errors propagate."""
    grpc_server, bound_grpc = build_grpc_server(
        gateway.grpc_servicer(), f"{host}:{grpc_port}", gateway.settings.limits.max_body_bytes
    )
    grace = gateway.settings.shutdown_grace_s
    config = http_config(gateway.app, host, port, gateway.settings.http_timeouts,
                         log_level="warning", lifespan="on", timeout_graceful_shutdown=grace)  # fmt: skip
    http = _Server(config)
    await grpc_server.start()
    task = asyncio.create_task(http.serve(), name="kvgate-gateway-http")
    try:
        await _until_started(http, task)
        if ready is not None:
            ready.set_result(Listening(host, _bound_port(http, port), bound_grpc))
        stopped = asyncio.ensure_future(stop.wait())
        await asyncio.wait([task, stopped], return_when=asyncio.FIRST_COMPLETED)
        stopped.cancel()
    finally:  # both fronts stop taking requests and drain together; the worker channels stay open
        # until both fronts' requests are done (the app's lifespan waits for the in-flight gate)
        grpc_stopped = asyncio.create_task(grpc_server.stop(grace))
        http.should_exit = True
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await grpc_stopped


async def _until_started(http: uvicorn.Server, task: asyncio.Task[None]) -> None:
    async with asyncio.timeout(START_TIMEOUT_S):
        while not http.started:
            if task.done():
                task.result()
                raise RuntimeError("the HTTP server exited while starting")
            await asyncio.sleep(0.01)


def _bound_port(http: uvicorn.Server, asked: int) -> int:
    """The port uvicorn bound (``asked`` unless it was 0)."""
    if asked:
        return asked
    for server in http.servers:
        for sock in server.sockets:
            return sock.getsockname()[1]
    return asked
