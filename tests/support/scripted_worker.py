"""A scripted worker: a real grpc.aio server speaking the worker .proto, with a toy generator.

Gateway tests run against it on loopback before (and beside) real engine workers. It keeps a real
chunk-hash prefix store (so cached tokens are honest), publishes stored chunks to an index, and can
be told to fail, stall or refuse, to exercise failover, deadlines and cancellation.
"""

from __future__ import annotations

import asyncio
import enum
import time
import zlib
from dataclasses import dataclass, field

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from kvgate.common.grpc_auth import RequireToken
from kvgate.common.grpc_options import SERVER_OPTIONS
from kvgate.index.base import PrefixIndex
from kvgate.index.types import IndexUnavailableError
from kvgate.proto import convert, worker_pb2, worker_pb2_grpc
from kvgate.proto.chain import ChainRoots, chain_hashes
from kvgate.proto.events import EventBatch, Holding, KVEvent, Snapshot
from kvgate.proto.ids import ChunkHash, Epoch, SeqNo, Tier, WorkerId
from kvgate.proto.layout import CacheLayout
from kvgate.proto.sampling import CacheHint, FinishReason, SamplingParams, TokenLogprob, Usage
from kvgate.proto.trust import sign_record
from kvgate.proto.workers import WorkerInfo, WorkerLoad

VOCAB = 1000
EOS = 999
HELD_UNTIL_MS = 10**13  # scripted workers never evict


class Mode(enum.Enum):
    SERVE = "serve"
    FAIL_BEFORE_FIRST = "fail_before_first"  # UNAVAILABLE before any token
    FAIL_AFTER_TWO = "fail_after_two"  # two tokens, then INTERNAL
    STALL = "stall"  # accepts, never answers
    STALL_AFTER_TWO = "stall_after_two"  # two tokens, then silence
    BUSY = "busy"  # RESOURCE_EXHAUSTED
    REJECT = "reject"  # INVALID_ARGUMENT


def fail_seed(worker_id: str) -> int:
    """In any mode, a request with this sampling seed fails at ``worker_id`` as in FAIL_BEFORE_FIRST
    (a client picks which worker fails its request, through the gateway, by the seed it sends)."""
    return zlib.crc32(worker_id.encode())


@dataclass
class ScriptedWorker(worker_pb2_grpc.KVWorkerServicer):
    worker_id: WorkerId
    config: CacheLayout
    index: PrefixIndex | None = None
    mode: Mode = Mode.SERVE
    token_delay_s: float = 0.0
    prefill_delay_per_token_s: float = 0.0  # per uncached prompt token: a hit answers sooner, like a real one
    epoch: int = 1
    port: int = 0
    held: set[ChunkHash] = field(default_factory=set)
    cancelled: list[str] = field(default_factory=list)
    served: list[str] = field(default_factory=list)
    received: list[str] = field(default_factory=list)
    max_in_flight: int | None = None  # beyond it, RESOURCE_EXHAUSTED (a worker's admission queue)
    active: int = 0
    hints: list[CacheHint] = field(default_factory=list)
    sampling: list[SamplingParams] = field(default_factory=list)  # each generation's, as received
    needs_resync: bool = False  # a publish to the index failed: the owner re-registers and resyncs
    reply: tuple[int, ...] = ()  # when set, every answer is these tokens (as many as fit), then STOP
    _seq: int = 0
    _server: grpc.aio.Server | None = None
    _subscribers: list[asyncio.Queue] = field(default_factory=list)

    @property
    def info(self) -> WorkerInfo:
        """Its registration record, signed with the deployment secret as a real worker's is."""
        info = WorkerInfo(
            self.worker_id,
            self.epoch,
            f"127.0.0.1:{self.port}",
            self.config.fingerprint(),
            self.config.model_id,
        )
        return sign_record(info, self.config.secret)

    async def start(self) -> ScriptedWorker:
        """Serves on a free loopback port, requiring the deployment's call token as a real worker does."""
        guard = RequireToken(
            self.config.secret, [worker_pb2.DESCRIPTOR.services_by_name["KVWorker"].full_name]
        )
        self._server = grpc.aio.server(options=SERVER_OPTIONS, interceptors=[guard])
        worker_pb2_grpc.add_KVWorkerServicer_to_server(self, self._server)
        health_pb2_grpc.add_HealthServicer_to_server(health.aio.HealthServicer(), self._server)
        self.port = self._server.add_insecure_port("127.0.0.1:0")
        await self._server.start()
        if self.index is not None:
            await self.index.register(self.info, WorkerLoad(gpu_blocks_total=100, gpu_blocks_free=100))
        return self

    async def stop(self) -> None:
        if self._server is not None:
            await self._server.stop(grace=None)

    async def Generate(self, request, context):
        self.received.append(request.request_id)
        if self.mode is Mode.BUSY or (self.max_in_flight is not None and self.active >= self.max_in_flight):
            await context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, "queue full")
        if self.mode is Mode.REJECT:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "prompt too long")
        if self.mode is Mode.FAIL_BEFORE_FIRST or request.sampling.seed == fail_seed(self.worker_id):
            await context.abort(grpc.StatusCode.UNAVAILABLE, "engine down")
        self.active += 1
        try:
            async for message in self._generate(request, context):
                yield message
        except asyncio.CancelledError:
            self.cancelled.append(request.request_id)
            raise
        finally:
            self.active -= 1

    async def _generate(self, request, context):
        if self.mode is Mode.STALL:
            await asyncio.sleep(3600)
        ids = list(request.prompt_token_ids)
        if request.HasField("cache_hint"):
            self.hints.append(convert.cache_hint_from_proto(request.cache_hint))
        cached = await self._cache(ids, self._roots(request))
        if self.prefill_delay_per_token_s:
            await asyncio.sleep((len(ids) - cached) * self.prefill_delay_per_token_s)
        sampling = convert.sampling_params_from_proto(request.sampling)
        self.sampling.append(sampling)
        produced = 0
        for i in range(min(sampling.max_tokens, len(self.reply) or sampling.max_tokens)):
            if self.mode is Mode.FAIL_AFTER_TWO and produced == 2:
                await context.abort(grpc.StatusCode.INTERNAL, "engine crashed")
            if self.mode is Mode.STALL_AFTER_TWO and produced == 2:
                await asyncio.sleep(3600)
            await asyncio.sleep(self.token_delay_s)
            produced += 1
            token = self.reply[i] if self.reply else (ids[-1] + i + 1) % EOS
            yield worker_pb2.GenerateResponse(
                tokens=worker_pb2.TokenBatch(
                    token_ids=[token],
                    logprobs=_scored([token], sampling.logprobs),
                    prompt_logprobs=_scored(ids[1:], sampling.prompt_logprobs) if i == 0 else [],
                )
            )
        usage = Usage(len(ids), produced, cached, cached, 0)
        self.served.append(request.request_id)
        yield worker_pb2.GenerateResponse(
            final=worker_pb2.FinalResult(
                finish_reason=convert.finish_reason_to_proto(
                    FinishReason.STOP if self.reply and produced == len(self.reply) else FinishReason.LENGTH
                ),
                usage=convert.usage_to_proto(usage),
            )
        )

    def _roots(self, request: worker_pb2.GenerateRequest) -> ChainRoots:
        """The request's hash chain, as a real worker builds it (salt, shared namespace)."""
        private = self.config.root(cache_salt=request.cache_salt).digest()
        if not request.shared_tokens:
            return ChainRoots(private)
        shared = self.config.root(cache_salt=request.shared_salt).digest()
        return ChainRoots(private, shared, request.shared_tokens)

    async def _cache(self, ids: list[int], roots: ChainRoots) -> int:
        """Cached prompt tokens (whole leading chunks already held); then holds them all."""
        hashes = chain_hashes(ids, roots, self.config.chunk_size)
        hits = next((i for i, h in enumerate(hashes) if h not in self.held), len(hashes))
        new = [h for h in hashes if h not in self.held]
        self.held.update(new)
        if new:
            self._seq += 1
            events = tuple(KVEvent.stored(h, Tier.GPU, HELD_UNTIL_MS) for h in new)
            await self._publish(EventBatch(self.worker_id, Epoch(self.epoch), SeqNo(self._seq), events))
        return min(hits * self.config.chunk_size, len(ids) - 1)

    async def _publish(self, batch: EventBatch) -> None:
        """To every event subscriber (gateways), and to the index when there is one; a failed index
        write marks the worker for a resync instead of failing the request."""
        for queue in self._subscribers:
            queue.put_nowait(batch)
        if self.index is None or self.needs_resync:
            return
        try:
            self.needs_resync = not (await self.index.apply(batch)).ok
        except IndexUnavailableError:
            self.needs_resync = True

    def snapshot(self) -> Snapshot:
        """Everything held, as of the last batch."""
        holdings = tuple(Holding(h, Tier.GPU, HELD_UNTIL_MS) for h in self.held)
        return Snapshot(self.worker_id, Epoch(self.epoch), SeqNo(self._seq), holdings)

    async def SubscribeEvents(self, request, context):
        queue: asyncio.Queue[EventBatch] = asyncio.Queue()
        self._subscribers.append(queue)
        try:
            yield worker_pb2.EventStreamMessage(snapshot=convert.snapshot_to_proto(self.snapshot()))
            while True:
                yield worker_pb2.EventStreamMessage(batch=convert.event_batch_to_proto(await queue.get()))
        finally:
            self._subscribers.remove(queue)

    async def Abort(self, request, context):
        return worker_pb2.AbortResponse(aborted=False)

    def load(self) -> WorkerLoad:
        return WorkerLoad(gpu_blocks_total=100, gpu_blocks_free=100, running_seqs=self.active)

    async def Stats(self, request, context):
        return worker_pb2.StatsResponse(
            info=convert.worker_info_to_proto(self.info),
            load=convert.worker_load_to_proto(self.load()),
            now_ms=time.time_ns() // 1_000_000,
        )


async def health_status(port: int) -> int:
    """The worker's grpc.health.v1 status (SERVING = 1)."""
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        reply = await health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest())
        return reply.status


def _scored(token_ids: list[int], top: int | None) -> list:
    """Log-probabilities as the worker contract sends them (one entry per token when asked, none
    otherwise): made up but well formed: the token at -1.0, its ``top`` most likely first."""
    if top is None:
        return []
    entries = []
    for token in token_ids:
        ranked = [token, *((token + k) % EOS for k in range(1, top))][:top]
        values = [-1.0 - k for k in range(len(ranked))]
        scored = TokenLogprob(-1.0, tuple(zip(ranked, values, strict=True)))
        entries.append(convert.token_logprob_to_proto(scored))
    return entries
