"""The engine thread: it sleeps while idle, and a failed step fails every request, turns the worker
NOT_SERVING and reports it broken (the owner then restarts it under a new epoch)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Any

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from kvgate.workers.engine import LLMEngine
from kvgate.workers.service import SERVICE_NAME, EngineUnavailableError
from kvgate.workers.service.errors import EngineStalledError
from tests.support.real_workers import StartWorker
from tests.workers.service.helpers import (
    client,
    engine_loop,
    generate_request,
    greedy,
    prompt,
    read_generation,
)


def count_steps(engine: LLMEngine) -> Callable[[], int]:
    """Wraps the engine's ``step`` (on the engine thread) and returns a reader of the count."""
    calls = [0]
    step = engine.step

    def counted() -> Any:
        calls[0] += 1
        return step()

    engine.step = counted  # type: ignore[method-assign]
    return lambda: calls[0]


async def test_an_idle_engine_sleeps_between_ticks(start_worker: StartWorker) -> None:
    worker = await start_worker(idle_tick_s=0.25)
    loop = engine_loop(worker)
    steps = await loop.call(count_steps)
    await asyncio.sleep(0.6)
    idle = steps()
    assert idle <= 3  # the idle ticks only (0.6 s / 0.25 s), never a spin
    async with client(worker.info.address) as stub:
        await read_generation(stub.Generate(generate_request(prompt(10), "r", greedy(5))))
    assert steps() >= idle + 5  # work runs step after step, without waiting for a tick


async def health(address: str, service: str = "") -> int:
    async with grpc.aio.insecure_channel(address) as channel:
        check = health_pb2.HealthCheckRequest(service=service)
        return (await health_pb2_grpc.HealthStub(channel).Check(check)).status


async def test_a_failed_step_fails_requests_and_marks_the_worker_broken(start_worker: StartWorker) -> None:
    worker = await start_worker()
    loop = engine_loop(worker)
    address = worker.info.address
    assert await health(address) == health_pb2.HealthCheckResponse.SERVING
    assert await health(address, SERVICE_NAME) == health_pb2.HealthCheckResponse.SERVING

    def break_forward(engine: LLMEngine) -> None:
        def boom(*_: object) -> None:
            raise RuntimeError("CUDA error: an illegal memory access was encountered")

        engine.runner.forward = boom  # type: ignore[method-assign]

    await loop.call(break_forward)
    async with client(address) as stub:
        with pytest.raises(grpc.aio.AioRpcError) as failed:
            await read_generation(stub.Generate(generate_request(prompt(10), "doomed")))
        error = await asyncio.wait_for(worker.wait_broken(), 5)
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await read_generation(stub.Generate(generate_request(prompt(10), "after")))
    assert failed.value.code() is grpc.StatusCode.UNAVAILABLE  # no token yet: the gateway retries
    assert "illegal memory access" in failed.value.details()
    assert isinstance(error, RuntimeError)
    assert refused.value.code() is grpc.StatusCode.UNAVAILABLE
    assert worker.broken
    assert await health(address) == health_pb2.HealthCheckResponse.NOT_SERVING
    with pytest.raises(EngineUnavailableError):
        await loop.call(lambda engine: None)


async def test_a_stalled_engine_fails_its_requests_and_marks_the_worker_broken(
    start_worker: StartWorker,
) -> None:
    """A step that never finishes (a hung kernel): after ``stall_timeout_s`` the request fails with
    UNAVAILABLE (no token yet: the gateway re-routes it) and the worker reports itself broken."""
    worker = await start_worker(stall_timeout_s=0.5)
    loop = engine_loop(worker)
    release = threading.Event()

    def hang(engine: LLMEngine) -> None:
        step = engine.step

        def stuck() -> Any:
            release.wait(30)
            return step()

        engine.step = stuck  # type: ignore[method-assign]

    await loop.call(hang)
    try:
        async with client(worker.info.address) as stub:
            with pytest.raises(grpc.aio.AioRpcError) as failed:
                await asyncio.wait_for(read_generation(stub.Generate(generate_request(prompt(10), "h"))), 10)
        error = await asyncio.wait_for(worker.wait_broken(), 5)
    finally:
        release.set()
    assert failed.value.code() is grpc.StatusCode.UNAVAILABLE
    assert "no engine step finished" in failed.value.details()
    assert isinstance(error, EngineStalledError)
    assert await health(worker.info.address) == health_pb2.HealthCheckResponse.NOT_SERVING


async def test_an_idle_engine_is_never_declared_stalled(start_worker: StartWorker) -> None:
    worker = await start_worker(stall_timeout_s=0.3, idle_tick_s=5.0)  # idle far longer than the timeout
    await asyncio.sleep(1.0)
    async with client(worker.info.address) as stub:
        await read_generation(stub.Generate(generate_request(prompt(10), "fine", greedy(3))))
    assert not worker.broken
