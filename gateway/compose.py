"""The gateway's composition root: builds every object once and wires them; nothing is global.

The FastAPI lifespan owns the background work (worker discovery) and closes the gRPC channels on
shutdown.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass

from fastapi import FastAPI

from kvgate.clock import Clock, SystemClock
from kvgate.gateway.admission import InFlightGate
from kvgate.gateway.api.app import create_app
from kvgate.gateway.api.auth import Authenticator
from kvgate.gateway.grpc_front import GatewayServicer
from kvgate.gateway.metrics import GatewayMetrics
from kvgate.gateway.prepare import Preparer
from kvgate.gateway.routing import get_policy
from kvgate.gateway.routing.router import Router
from kvgate.gateway.settings import GatewaySettings
from kvgate.gateway.tenancy import RateLimiter
from kvgate.gateway.textgen import TextGenerator
from kvgate.gateway.upstream.channels import ChannelPool
from kvgate.gateway.upstream.directory import WorkerDirectory
from kvgate.gateway.upstream.dispatch import Dispatcher
from kvgate.index.base import PrefixIndex
from kvgate.tokenizer import Tokenizer


@dataclass(frozen=True)
class Gateway:
    """A built gateway: the HTTP app plus the services the other fronts share."""

    settings: GatewaySettings
    app: FastAPI
    preparer: Preparer
    generator: TextGenerator
    dispatcher: Dispatcher
    directory: WorkerDirectory
    router: Router
    metrics: GatewayMetrics
    gate: InFlightGate
    auth: Authenticator

    def grpc_servicer(self) -> GatewayServicer:
        """The public gRPC service over the same services as the HTTP app."""
        return GatewayServicer(
            self.preparer,
            self.generator,
            self.dispatcher,
            self.settings.model_name,
            self.settings.limits.context_window,
            self.auth,
            self.gate,
        )


def build_gateway(
    settings: GatewaySettings,
    index: PrefixIndex,
    tokenizer: Tokenizer,
    refresh_s: float = 1.0,
    clock: Clock | None = None,
) -> Gateway:
    """Wires a gateway over ``index`` (owned by the caller, who closes it); ``clock`` is the
    index's (wall) clock."""
    clock = clock or SystemClock()
    directory = WorkerDirectory(index, settings.cache.fingerprint(), refresh_s)
    router = Router(
        index,
        get_policy(settings.policy, settings.routing),
        get_policy("least_loaded", settings.routing),
        settings.cache.chunk_size,
        settings.index.pending_ttl_s,
        clock,
    )
    channels = ChannelPool(tls=settings.worker_tls)
    metrics = GatewayMetrics(
        settings.model_name, settings.policy, settings.cache.chunk_size, block_size=settings.cache.block_size
    )
    dispatcher = Dispatcher(directory, router, channels, index, settings.max_attempts, metrics=metrics)
    limiter = RateLimiter()
    preparer = Preparer(settings, tokenizer, limiter)
    generator = TextGenerator(dispatcher, tokenizer)

    @contextlib.asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        await directory.refresh()
        discovery = asyncio.create_task(
            directory.run(dispatcher.reconcile), name="kvgate-worker-discovery"
        )
        try:
            yield
        finally:
            discovery.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await discovery
            await router.drain()
            await channels.close()

    gate = InFlightGate(settings.max_concurrent_requests)
    auth = Authenticator(settings.keys, limiter)
    app = create_app(settings, preparer, generator, dispatcher, directory, metrics, gate, auth, lifespan)
    return Gateway(settings, app, preparer, generator, dispatcher, directory, router, metrics, gate, auth)
