"""A real kvgate worker (:class:`WorkerServer`) in a child process, and the gRPC client side of the serving
benchmark: each Generate stream timed at the client as its token batches arrive.

The worker runs in its own process so that the client's Python (and transformers' runs between the
engine's) never shares the worker's interpreter lock: the engine is measured as a deployment runs it.
"""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing
import time
from collections.abc import Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection
from types import TracebackType

import numpy as np

from bench.hf_side import DecodeRun
from kvgate.common.grpc_options import CLIENT_OPTIONS
from kvgate.common.grpc_tls import ChannelSecurity
from kvgate.proto import convert, worker_pb2, worker_pb2_grpc
from kvgate.proto.sampling import SamplingParams
from kvgate.workers.service import WorkerConfig, WorkerServer


class WorkerProcess:
    """``with WorkerProcess(config, start_timeout_s) as address:`` a started worker serving at
    ``address`` (``host:port``) until the block exits; then it is stopped, killed if it does not stop
    within 60 s. RuntimeError (naming the worker's error) when it fails to start or does not start in
    time."""

    def __init__(self, config: WorkerConfig, start_timeout_s: float = 600.0) -> None:
        self.config, self.start_timeout_s = config, start_timeout_s
        context = multiprocessing.get_context("spawn")  # CUDA cannot be used in a forked child
        self._conn, child_conn = context.Pipe()
        self._process = context.Process(target=_serve, args=(config, child_conn), daemon=True)

    def __enter__(self) -> str:
        self._process.start()
        if not self._conn.poll(self.start_timeout_s):
            self._kill()
            raise RuntimeError(f"the worker did not start within {self.start_timeout_s:.0f} s")
        kind, value = self._conn.recv()
        if kind != "address":
            self._kill()
            raise RuntimeError(f"the worker failed to start: {value}")
        return value

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        with contextlib.suppress(OSError):  # a dead child's pipe is broken: kill it all the same
            self._conn.send("stop")
        self._process.join(60)
        self._kill()

    def _kill(self) -> None:
        if self._process.is_alive():
            self._process.kill()
            self._process.join(10)


def _serve(config: WorkerConfig, conn: Connection) -> None:
    """The child's entry point: serve until the parent sends anything or goes away."""
    asyncio.run(_serve_until_told(config, conn))


async def _serve_until_told(config: WorkerConfig, conn: Connection) -> None:
    server = WorkerServer(None)
    try:
        address = await server.start(config)
    except BaseException as exc:
        conn.send(("error", f"{type(exc).__name__}: {exc}"))
        raise
    conn.send(("address", address))
    with contextlib.suppress(EOFError):  # the parent is gone: stop all the same
        await asyncio.to_thread(conn.recv)
    await server.stop()


@dataclass(frozen=True)
class StreamTiming:
    """One Generate stream at the client: ``sent_s`` when the call was made, ``arrivals`` each token
    batch's ``(time.perf_counter(), tokens)``, ``cached_tokens`` the prompt tokens the worker reused."""

    sent_s: float
    arrivals: tuple[tuple[float, int], ...]
    cached_tokens: int

    @property
    def ttft_s(self) -> float:
        return self.arrivals[0][0] - self.sent_s


class WorkerClient:
    """``async with WorkerClient(address, secret) as client:`` a channel to the worker presenting the
    deployment's call token (the hash secret of its cache layout)."""

    def __init__(self, address: str, secret: bytes) -> None:
        self._channel = ChannelSecurity.of(None, secret).open(address, CLIENT_OPTIONS)
        self._stub = worker_pb2_grpc.KVWorkerStub(self._channel)
        self._next_id = 0

    async def __aenter__(self) -> WorkerClient:
        return self

    async def __aexit__(self, *_: object) -> None:
        await self._channel.close()

    async def generate(
        self, prompt: np.ndarray, max_tokens: int, kv_source: worker_pb2.KVSource | None = None
    ) -> StreamTiming:
        """Greedy ``max_tokens`` (EOS ignored) after ``prompt``, fetching its cached prefix's KV from
        ``kv_source`` first when given; RuntimeError when the stream ends with anything but ``length``
        or yields no token."""
        self._next_id += 1
        sampling = SamplingParams(temperature=0, max_tokens=max_tokens, ignore_eos=True)
        request = worker_pb2.GenerateRequest(
            request_id=f"bench-{self._next_id}",
            prompt_token_ids=prompt.tolist(),
            sampling=convert.sampling_params_to_proto(sampling),
        )
        if kv_source is not None:
            request.kv_source.CopyFrom(kv_source)
        sent = time.perf_counter()
        arrivals: list[tuple[float, int]] = []
        final = None
        async for message in self._stub.Generate(request):
            if message.HasField("tokens"):
                arrivals.append((time.perf_counter(), len(message.tokens.token_ids)))
            elif message.HasField("final"):
                final = message.final
        if final is None or not arrivals or final.error:
            raise RuntimeError(f"generation failed: {final.error if final else 'no final message'}")
        return StreamTiming(sent, tuple(arrivals), final.usage.cached_tokens)

    async def stats(self) -> worker_pb2.StatsResponse:
        """The worker's load and counters now (its ``Stats`` RPC)."""
        return await self._stub.Stats(worker_pb2.StatsRequest())

    async def batch(self, prompts: Sequence[np.ndarray], max_tokens: int) -> list[StreamTiming]:
        """All ``prompts`` sent at once, one stream each."""
        return list(await asyncio.gather(*(self.generate(p, max_tokens) for p in prompts)))


class NoSteadyWindowError(RuntimeError):
    """The streams of a decode run never all decoded at once (see ``steady_decode``)."""


def steady_decode(streams: Sequence[StreamTiming]) -> DecodeRun:
    """Tokens/s while every stream is decoding: the tokens that arrive after the last stream's first
    token and no later than the first stream's last token, over that window. In lockstep decoding it
    counts each step's tokens once the step is complete at the client, so it may miss at most one token
    per stream (a bias against the worker below 1 / new tokens); streams that ran one after another
    (no overlap) leave no window, and NoSteadyWindowError says so."""
    start = max(s.arrivals[0][0] for s in streams)
    end = min(s.arrivals[-1][0] for s in streams)
    if end <= start:
        raise NoSteadyWindowError("the streams never all decoded at once: no steady window to measure")
    tokens = sum(n for s in streams for t, n in s.arrivals if start < t <= end)
    return DecodeRun(tokens, end - start)
