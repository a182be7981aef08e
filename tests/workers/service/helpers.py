"""Builders and probes for the worker-service tests: configs, a gRPC client, engine stalls, polls."""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import threading
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import numpy as np

from kvgate.common.grpc_options import CLIENT_OPTIONS
from kvgate.common.grpc_tls import ChannelSecurity
from kvgate.proto import convert, worker_pb2, worker_pb2_grpc
from kvgate.proto.hashing import chunk_hashes
from kvgate.proto.ids import ChunkHash, Epoch, WorkerId
from kvgate.proto.layout import CacheLayout
from kvgate.proto.sampling import FinishReason, SamplingParams, Usage
from kvgate.workers.engine import EngineConfig, LLMEngine, SchedulingLimits
from kvgate.workers.service import EngineLoop, WorkerConfig, WorkerServer

# The deployment's cache layout, the gateway's defaults: 128-token chunks of 16-token blocks.
CACHE = CacheLayout("tiny-llama", secret=b"service-tests")
GPU_BLOCKS = 64  # 1024 tokens: two sequences of the 512-token context at once
MAX_MODEL_LEN = 512


def worker_config(
    model: Path,
    worker_id: str = "worker-0",
    epoch: int = 1,
    *,
    max_num_seqs: int = 8,
    **overrides: Any,
) -> WorkerConfig:
    """A worker on the tiny model: loopback, any free port, one torch thread, short periods."""
    engine = EngineConfig(
        CACHE,
        num_gpu_blocks=GPU_BLOCKS,
        max_model_len=MAX_MODEL_LEN,
        limits=SchedulingLimits(max_num_seqs=max_num_seqs),
    )
    settings: dict[str, Any] = {"heartbeat_s": 0.1, "idle_tick_s": 0.2, "torch_threads": 1,
                                "shutdown_grace_s": 1.0} | overrides  # fmt: skip
    return WorkerConfig(model, engine, WorkerId(worker_id), Epoch(epoch), **settings)


def prompt(n: int, seed: int = 0) -> list[int]:
    """``n`` token ids of the tiny vocabulary, reproducibly."""
    return np.random.default_rng(seed).integers(0, 320, n).tolist()


def hashes_of(ids: Sequence[int], cache: CacheLayout = CACHE) -> list[ChunkHash]:
    """The gateway's chunk hashes of ``ids`` (unsalted)."""
    return chunk_hashes(np.asarray(ids, dtype=np.uint32), cache.root().digest(), cache.chunk_size)


def greedy(max_tokens: int) -> SamplingParams:
    return SamplingParams(temperature=0, max_tokens=max_tokens, ignore_eos=True)


def generate_request(
    ids: Sequence[int], request_id: str = "r", sampling: SamplingParams | None = None
) -> worker_pb2.GenerateRequest:
    return worker_pb2.GenerateRequest(
        request_id=request_id,
        prompt_token_ids=list(ids),
        sampling=convert.sampling_params_to_proto(sampling or greedy(8)),
    )


@dataclass
class Generated:
    """A Generate stream, read to the end: token batches, then the final message."""

    batches: list[list[int]]
    finish_reason: FinishReason
    usage: Usage
    matched_stop: str | None

    @property
    def tokens(self) -> list[int]:
        return [t for batch in self.batches for t in batch]


async def read_generation(call: grpc.aio.UnaryStreamCall) -> Generated:
    """Reads a Generate stream; asserts that exactly one final message ends it."""
    batches: list[list[int]] = []
    final = None
    async for msg in call:
        assert final is None, "nothing may follow the final message"
        if msg.HasField("final"):
            final = msg.final
        else:
            assert msg.tokens.token_ids, "a token batch is never empty"
            batches.append(list(msg.tokens.token_ids))
    assert final is not None, "the stream ended without a final message"
    stop = final.matched_stop if final.HasField("matched_stop") else None
    reason = convert.finish_reason_from_proto(final.finish_reason)
    return Generated(batches, reason, convert.usage_from_proto(final.usage), stop)


@contextlib.asynccontextmanager
async def client(address: str, secret: bytes = CACHE.secret) -> AsyncIterator[worker_pb2_grpc.KVWorkerStub]:
    """A stub on a plaintext channel presenting the call token of ``secret`` (the deployment's)."""
    async with ChannelSecurity.of(None, secret).open(address, CLIENT_OPTIONS) as channel:
        yield worker_pb2_grpc.KVWorkerStub(channel)


def engine_loop(server: WorkerServer) -> EngineLoop:
    assert server.loop is not None
    return server.loop


@contextlib.asynccontextmanager
async def stalled(loop: EngineLoop) -> AsyncIterator[None]:
    """Holds the engine thread between two steps until the block exits (requests queue up)."""
    entered, release = threading.Event(), threading.Event()

    def hold(_: LLMEngine) -> None:
        entered.set()
        release.wait(30)

    held = asyncio.ensure_future(loop.call(hold))
    assert await asyncio.to_thread(entered.wait, 10), "the engine thread never took the stall"
    try:
        yield
    finally:
        release.set()
        await held


async def eventually(check: Callable[[], Any], timeout_s: float = 10.0) -> Any:
    """Polls ``check`` (plain or async) until it returns something truthy, which is returned;
    AssertionError after ``timeout_s`` with the last value."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = check()
        if inspect.isawaitable(value):
            value = await value
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"still {value!r} after {timeout_s}s")
        await asyncio.sleep(0.02)


def engine_is_idle(engine: LLMEngine) -> bool:
    """No request queued or running, no sequence tracked, every GPU block free (empty or cached)."""
    gpu = engine.kv.gpu_pool
    return not engine.has_work() and not engine.kv.seq_ids() and gpu.num_free == gpu.num_blocks
