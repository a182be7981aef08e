"""``WorkerServer``: the composition root of one worker incarnation.

``start`` loads the engine (off the event loop), wires the engine loop, the event hub, the gRPC
server (``kvgate.v1.KVWorker``, which serves only callers with the deployment's call token when there
is a secret, plus ``grpc.health.v1``, open to all) and, when an index is given, the index publisher
(its record signed with the secret), and returns the bound address. ``stop`` undoes it in reverse:
health NOT_SERVING, deregister, end the event streams, let running calls finish
(``shutdown_grace_s``), stop the engine.

When the engine breaks, health turns NOT_SERVING, the worker deregisters and its event streams end;
:meth:`wait_broken` returns, and the owner (the Ray actor, the CLI) should exit the process so the
worker is restarted under a new epoch.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

import grpc
import torch
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from kvgate.common.bounded_stop import stop_within
from kvgate.common.clock import Clock
from kvgate.common.grpc_auth import RequireToken
from kvgate.common.grpc_options import SERVER_OPTIONS
from kvgate.common.grpc_tls import ChannelSecurity
from kvgate.index.base import PrefixIndex
from kvgate.proto import worker_pb2, worker_pb2_grpc
from kvgate.proto.trust import kv_block_key, sign_record
from kvgate.proto.workers import WorkerInfo, WorkerLoad
from kvgate.workers.engine import LLMEngine, load_engine
from kvgate.workers.kv import StepEventPublisher
from kvgate.workers.model import kv_cache_bytes_per_block
from kvgate.workers.service.admissions import AdmissionAnnouncer
from kvgate.workers.service.config import WorkerConfig
from kvgate.workers.service.engine_loop import EngineLoop
from kvgate.workers.service.event_hub import EventHub
from kvgate.workers.service.index_publisher import IndexPublisher
from kvgate.workers.service.kv_transfer import KVTransfers
from kvgate.workers.service.metrics import MetricsEndpoint, WorkerCollector
from kvgate.workers.service.servicer import WorkerServicer
from kvgate.workers.service.transfer_counters import TransferCounters

log = logging.getLogger(__name__)

SERVICE_NAME = worker_pb2.DESCRIPTOR.services_by_name["KVWorker"].full_name
_SERVING = health_pb2.HealthCheckResponse.SERVING
_NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING
_SLACK_S = 3.0  # how much longer than the grace a shutdown step may take before it is abandoned


class WorkerServer:
    """One incarnation: :meth:`start` once, :meth:`stop` once. ``index``: the shared prefix index to
    publish to (None in embedded mode, where the gateway subscribes to the event stream instead);
    owned by the caller, who closes it after :meth:`stop`. ``clock``: the engine's (wall) clock."""

    def __init__(self, index: PrefixIndex | None = None, *, clock: Clock | None = None) -> None:
        self._index = index
        self._clock = clock
        self._health = health.aio.HealthServicer()
        self._broken = asyncio.Event()
        self._broken_task: asyncio.Task[None] | None = None
        self._server: grpc.aio.Server | None = None
        self._config: WorkerConfig | None = None
        self.engine: LLMEngine | None = None  # touch it only through loop.call (its own thread)
        self.loop: EngineLoop | None = None
        self.hub: EventHub | None = None
        self.publisher: IndexPublisher | None = None
        self.info: WorkerInfo | None = None
        self.port = 0  # the bound port, once started
        self.metrics: MetricsEndpoint | None = None
        self.transfers: KVTransfers | None = None  # KV fetched from / sent to other workers
        self._transfer_counters = TransferCounters()

    @property
    def broken(self) -> bool:
        return self._broken.is_set()

    async def start(self, config: WorkerConfig) -> str:
        """Builds and serves the worker; returns its address (``host:port``, the port bound when
        ``config.port`` is 0). Loading errors propagate; nothing is left running then."""
        if self._config is not None:
            raise RuntimeError("a WorkerServer starts once")
        self._config = config
        if config.torch_threads is not None:
            torch.set_num_threads(config.torch_threads)
        events = StepEventPublisher(config.worker_id, config.epoch)
        self.engine = await asyncio.to_thread(
            load_engine, config.model_path, config.engine, events,
            clock=self._clock, with_tokenizer=config.with_tokenizer, adapters=dict(config.adapters),
            lora_dir=config.lora_dir,
        )  # fmt: skip
        self.hub = hub = EventHub(config.worker_id, config.epoch, config.subscriber_queue)
        announcer = AdmissionAnnouncer(hub, config.worker_id, config.epoch, config.engine.chunk_size)
        self.loop = loop = EngineLoop(
            self.engine,
            max_in_flight=config.max_in_flight,
            on_events=hub.publish,
            on_admit=announcer.announce,
            on_broken=self._on_broken,
            idle_tick_s=config.idle_tick_s,
            torch_threads=config.torch_threads,
            stall_timeout_s=config.stall_timeout_s,
        )

        def load() -> WorkerLoad:  # every report the worker makes counts the admissions since the last step
            return announcer.load(loop.stats)

        secret = config.engine.cache.secret
        self._server = grpc.aio.server(
            options=SERVER_OPTIONS, interceptors=[RequireToken(secret, [SERVICE_NAME])]
        )
        metrics_address = self._serve_metrics(config, loop)
        self.info = info = self._bind(self._server, config, metrics_address)
        self.transfers = transfers = self._transfers(config, loop, info)
        servicer = WorkerServicer(loop, hub, info, load, transfers)
        worker_pb2_grpc.add_KVWorkerServicer_to_server(servicer, self._server)
        health_pb2_grpc.add_HealthServicer_to_server(self._health, self._server)
        loop.start()
        await self._server.start()
        await self._set_health(_SERVING)
        if self._index is not None:
            self.publisher = IndexPublisher(self._index, info, load, hub, heartbeat_s=config.heartbeat_s)
            self.publisher.start()
        log.info(
            "worker %s (epoch %d) serving on %s; %s",
            info.worker_id, info.epoch, info.address, self.engine.capacity.describe(),
        )  # fmt: skip
        return info.address

    def _bind(self, server: grpc.aio.Server, config: WorkerConfig, metrics_address: str) -> WorkerInfo:
        """Binds ``server``'s port (``self.port``); the registration record with the bound address,
        signed with the deployment secret."""
        self.port = port = _first_bindable(config.candidate_ports(config.port), _binder(server, config))
        cache = config.engine.cache
        info = WorkerInfo(
            config.worker_id, config.epoch, config.address(port), cache.fingerprint(), cache.model_id,
            metrics_address, config.node_id, adapters=self.engine.adapters.names,
            loadable_adapters=self.engine.library.loadable,
        )  # fmt: skip
        return sign_record(info, cache.secret)

    def _transfers(self, config: WorkerConfig, loop: EngineLoop, info: WorkerInfo) -> KVTransfers:
        """Fetches from other workers over channels like the gateway's: TLS when configured, with the
        deployment's call token."""
        secret = config.engine.cache.secret
        security = ChannelSecurity.of(config.tls, secret)
        block_size, timeout_s = config.engine.block_size, config.kv_fetch_timeout_s
        counters, key = self._transfer_counters, kv_block_key(secret)
        return KVTransfers(loop, info, security, block_size, timeout_s, counters, key)

    def _serve_metrics(self, config: WorkerConfig, loop: EngineLoop) -> str:
        """Starts the Prometheus exporter when ``config.metrics_port`` is set; its address (or the
        configured one)."""
        if config.metrics_port is None:
            return config.metrics_address
        block_bytes = kv_cache_bytes_per_block(self.engine.layout.kv, config.engine.block_size)
        collector = WorkerCollector(
            config.worker_id, lambda: loop.stats, block_bytes, lambda: self._transfer_counters
        )
        self.metrics = MetricsEndpoint(collector)
        endpoint = self.metrics
        ports = config.candidate_ports(config.metrics_port)
        port = _first_bindable(ports, lambda p: endpoint.start(config.host, p))
        return config.address(port)

    async def stop(self) -> None:
        """Stops serving: NOT_SERVING, deregister, end the event streams, let running calls finish
        within ``shutdown_grace_s``, stop the engine thread. Idempotent; safe after a failed start.
        A step that hangs (an index or a gRPC peer that never answers) is abandoned after its
        deadline, so the engine is always stopped."""
        grace = self._config.shutdown_grace_s if self._config else 0.0
        await self._set_health(_NOT_SERVING)
        await stop_within("leaving the index", self._retire(), grace + _SLACK_S)
        if self._broken_task is not None:
            await stop_within("leaving the index after a break", self._broken_task, grace + _SLACK_S)
        if self._server is not None:
            await stop_within("stopping the gRPC server", self._server.stop(grace), grace + _SLACK_S)
        if self.transfers is not None:
            await self.transfers.close()
        if self.loop is not None:
            await self.loop.stop()
        if self.metrics is not None:
            await asyncio.to_thread(self.metrics.stop)  # joins the exporter's thread

    async def wait_broken(self) -> BaseException | None:
        """Returns once the engine broke, with its exception (the owner then exits the process)."""
        await self._broken.wait()
        return self.loop.error if self.loop else None

    async def _retire(self) -> None:
        """Leaves the index and ends the event streams (the incarnation is over). Idempotent."""
        if self.publisher is not None:
            await self.publisher.stop(deregister=True)
        if self.hub is not None:
            self.hub.close()

    def _on_broken(self, exc: BaseException) -> None:
        log.error("worker engine broke (%r): NOT_SERVING until the process is restarted", exc)
        self._broken.set()
        self._broken_task = asyncio.create_task(self._after_break(), name="kvgate-worker-broken")

    async def _after_break(self) -> None:
        await self._set_health(_NOT_SERVING)
        await self._retire()

    async def _set_health(self, status: health_pb2.HealthCheckResponse.ServingStatus) -> None:
        for service in ("", SERVICE_NAME):
            await self._health.set(service, status)


def _first_bindable(ports: range, bind: Callable[[int], int]) -> int:
    """``bind(port)`` for each port in turn until one succeeds; its bound port. RuntimeError (naming
    the range and the last error, which may be a bad TLS certificate rather than a taken port) when
    none binds."""
    last: Exception | None = None
    for port in ports:
        try:
            return bind(port)
        except (OSError, RuntimeError) as exc:
            log.debug("port %d did not bind (%s); trying the next", port, exc)
            last = exc
    raise RuntimeError(f"no free port in {ports.start}..{ports.stop - 1} (last error: {last})")


def _binder(server: grpc.aio.Server, config: WorkerConfig) -> Callable[[int], int]:
    """Binds one port of ``server``: TLS when ``config.tls`` is set, else plaintext."""
    if config.tls is None:
        return lambda port: server.add_insecure_port(f"{config.host}:{port}")
    credentials = config.tls.server_credentials()
    return lambda port: server.add_secure_port(f"{config.host}:{port}", credentials)
