"""The gateway's composition root: builds every object once and wires them; nothing is global.

The FastAPI lifespan owns the background work (worker discovery) and closes the gRPC channels on
shutdown.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass

from fastapi import FastAPI

from kvgate.common.clock import Clock, SystemClock
from kvgate.common.tokenizer import SegmentCache, SegmentedEncoder, Tokenizer
from kvgate.gateway.conversations import MemoryResponseStore, ResponseStore
from kvgate.gateway.core.admission import InFlightGate
from kvgate.gateway.core.auth import Authenticator
from kvgate.gateway.core.call_formats import marker_ids, served_formats
from kvgate.gateway.core.constraints import ConstraintChecker
from kvgate.gateway.core.jobs import JobBuilder
from kvgate.gateway.core.prompts import PromptEncoder
from kvgate.gateway.core.spine import RequestCore
from kvgate.gateway.core.textgen import TextGenerator
from kvgate.gateway.diagnosis.diagnose import Layout
from kvgate.gateway.diagnosis.recorder import CacheDiagnostics, worker_marks
from kvgate.gateway.grpc_api.servicer import GatewayServicer
from kvgate.gateway.http_api.app import create_app
from kvgate.gateway.metrics import GatewayMetrics
from kvgate.gateway.routing import get_policy
from kvgate.gateway.routing.router import Router
from kvgate.gateway.settings import GatewaySettings
from kvgate.gateway.tenancy import RateLimiter
from kvgate.gateway.upstream.channels import ChannelPool
from kvgate.gateway.upstream.directory import WorkerDirectory
from kvgate.gateway.upstream.dispatch import Dispatcher
from kvgate.index.base import PrefixIndex


@dataclass(frozen=True)
class Gateway:
    """A built gateway: the request core, its HTTP front, and the services behind them."""

    settings: GatewaySettings
    app: FastAPI
    core: RequestCore
    dispatcher: Dispatcher
    directory: WorkerDirectory
    router: Router
    metrics: GatewayMetrics
    diagnostics: CacheDiagnostics
    responses: ResponseStore  # the Responses API's stored responses (``previous_response_id``)

    @property
    def gate(self) -> InFlightGate:
        return self.core.gate

    def grpc_servicer(self) -> GatewayServicer:
        """The public gRPC front over the same core as the HTTP app."""
        return GatewayServicer(self.core)


def build_gateway(
    settings: GatewaySettings,
    index: PrefixIndex,
    tokenizer: Tokenizer,
    refresh_s: float = 1.0,
    clock: Clock | None = None,
    responses: ResponseStore | None = None,
) -> Gateway:
    """Wires a gateway over ``index`` (owned by the caller, who closes it); ``clock`` is the
    index's (wall) clock. ``responses``: where the Responses API keeps stored responses (None: this
    gateway's memory, bounded by ``settings.responses``)."""
    clock = clock or SystemClock()
    directory = WorkerDirectory(index, settings.cache.fingerprint(), refresh_s, secret=settings.cache.secret)
    router = Router(
        index,
        get_policy(settings.policy, settings.routing),
        get_policy("least_loaded", settings.routing),
        settings.cache.chunk_size,
        settings.index.pending_ttl_s,
        clock,
        block_tokens=settings.cache.block_size,  # the unit of the workers' reported capacity
    )
    channels = ChannelPool(tls=settings.worker_tls, secret=settings.cache.secret)
    metrics = GatewayMetrics(
        settings.model_name,
        settings.policy,
        settings.cache.chunk_size,
        block_size=settings.cache.block_size,
        tenants=[t.name for t in settings.keys.tenants] if settings.keys is not None else (),
    )
    dispatcher = Dispatcher(directory, router, channels, index, settings.max_attempts, metrics=metrics)
    diagnostics = CacheDiagnostics(
        settings.diagnosis,
        Layout(settings.cache.chunk_size, settings.cache.block_size),
        tokenizer,
        lambda: worker_marks(directory.known(), directory.live()),
        metrics.diagnosed,
    )
    core = _request_core(settings, tokenizer, dispatcher, diagnostics)

    @contextlib.asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        await directory.refresh()
        discovery = asyncio.create_task(directory.run(dispatcher.reconcile), name="kvgate-worker-discovery")
        try:
            yield
        finally:
            # the fronts stopped taking requests; those in flight (either front's) may finish first
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(settings.shutdown_grace_s):
                    await core.gate.drained()
            discovery.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await discovery
            await router.drain()
            await dispatcher.close()
            await channels.close()

    responses = responses or MemoryResponseStore(settings.responses, time.monotonic)
    app = create_app(core, directory, metrics, responses, lifespan)
    return Gateway(settings, app, core, dispatcher, directory, router, metrics, diagnostics, responses)


def _request_core(
    settings: GatewaySettings, tokenizer: Tokenizer, dispatcher: Dispatcher, diagnostics: CacheDiagnostics
) -> RequestCore:
    """The spine's services, each built once: one rate limiter for the key check and the charge; the
    tool-call formats the served model writes, read from its tokenizer."""
    limiter = RateLimiter()
    formats = served_formats(tokenizer)
    return RequestCore(
        settings,
        Authenticator(settings.keys, limiter),
        InFlightGate(settings.max_concurrent_requests),
        _prompt_encoder(settings, tokenizer),
        JobBuilder(settings, limiter),
        dispatcher,
        TextGenerator(dispatcher, tokenizer, marker_ids(tokenizer, formats)),
        ConstraintChecker(),
        diagnostics,
        formats,
    )


def _prompt_encoder(settings: GatewaySettings, tokenizer: Tokenizer) -> PromptEncoder:
    """The prompt encoder, with this process's one cache of prompt pieces' token ids."""
    chats = SegmentedEncoder(tokenizer, SegmentCache(settings.tokenizer_cache_bytes))
    return PromptEncoder(tokenizer, chats, settings.limits.max_messages, settings.limits.context_window)
