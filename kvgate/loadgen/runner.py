"""Runs a workload against a gateway with bounded concurrency, streaming every request to measure time
to first token: over its OpenAI API (:func:`run`) or its gRPC front (:func:`run_grpc`, through
:mod:`kvgate.client`). Bounded in requests and in time; it always stops by itself."""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

import httpx

from kvgate.client import AsyncKVGateClient, Generation, KVGateError
from kvgate.loadgen.workload import Request


@dataclass(frozen=True, slots=True)
class Outcome:
    """One request as the client saw it; ``error`` is None on success."""

    group: str
    ttft_s: float | None
    latency_s: float
    prompt_tokens: int = 0
    cached_tokens: int = 0
    completion_tokens: int = 0
    error: str | None = None


async def run(
    url: str,
    model: str,
    requests: Sequence[Request],
    concurrency: int,
    timeout_s: float,
    progress: bool = True,
    headers: dict[str, str] | None = None,
) -> tuple[list[Outcome], float]:
    """All outcomes (in completion order) and the wall time. Requests not started before
    ``timeout_s`` are not sent. ``headers`` go with every request (an API key)."""
    limits = httpx.Limits(max_connections=concurrency)
    async with httpx.AsyncClient(
        base_url=url.rstrip("/"), limits=limits, timeout=timeout_s, headers=headers
    ) as client:
        return await _drive(lambda r: one(client, model, r), requests, concurrency, timeout_s, progress)


async def run_grpc(
    target: str,
    model: str,
    requests: Sequence[Request],
    concurrency: int,
    timeout_s: float,
    progress: bool = True,
    api_key: str | None = None,
) -> tuple[list[Outcome], float]:
    """:func:`run` over the gateway's gRPC front at ``target`` (``host:port``), through one channel."""
    async with AsyncKVGateClient(target, api_key=api_key, timeout_s=timeout_s, retries=0) as client:
        return await _drive(lambda r: one_grpc(client, model, r), requests, concurrency, timeout_s, progress)


async def _drive(
    send: Callable[[Request], Awaitable[Outcome]],
    requests: Sequence[Request],
    concurrency: int,
    timeout_s: float,
    progress: bool,
) -> tuple[list[Outcome], float]:
    queue: asyncio.Queue[Request] = asyncio.Queue()
    for request in requests:
        queue.put_nowait(request)
    outcomes: list[Outcome] = []
    start = time.monotonic()
    deadline = start + timeout_s

    async def worker() -> None:
        while not queue.empty() and time.monotonic() < deadline:
            outcomes.append(await send(queue.get_nowait()))

    reporter = asyncio.create_task(_report(outcomes, len(requests))) if progress else None
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    if reporter is not None:
        reporter.cancel()
    return outcomes, time.monotonic() - start


async def one_grpc(client: AsyncKVGateClient, model: str, request: Request) -> Outcome:
    """Streams one chat over gRPC; never raises (failures become outcomes with an error)."""
    start = time.monotonic()
    first: float | None = None
    try:
        async for item in client.stream(messages=request.messages, model=model,
                                        max_tokens=request.max_tokens, temperature=0.0):  # fmt: skip
            if isinstance(item, Generation):
                usage, latency = item.usage, time.monotonic() - start
                return Outcome(request.group, first, latency, usage.prompt_tokens, usage.cached_tokens,
                               usage.completion_tokens)  # fmt: skip
            if first is None and item.text:
                first = time.monotonic() - start
    except KVGateError as exc:
        return Outcome(request.group, first, time.monotonic() - start, error=str(exc))
    return Outcome(request.group, first, time.monotonic() - start, error="no final message")


async def one(client: httpx.AsyncClient, model: str, request: Request) -> Outcome:
    """Streams one chat completion; never raises (failures become outcomes with an error)."""
    body = {
        "model": model,
        "messages": list(request.messages),
        "max_tokens": request.max_tokens,
        "temperature": 0,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    start = time.monotonic()
    first: float | None = None
    usage: dict = {}
    try:
        async with client.stream("POST", "/v1/chat/completions", json=body) as response:
            if response.status_code != 200:
                detail = (await response.aread()).decode(errors="replace")[:200]
                return Outcome(
                    request.group, None, time.monotonic() - start, error=f"{response.status_code} {detail}"
                )
            async for line in response.aiter_lines():
                if not line.startswith("data: {"):
                    continue
                chunk = json.loads(line[6:])
                if "error" in chunk:
                    return Outcome(
                        request.group, first, time.monotonic() - start, error=chunk["error"]["message"]
                    )
                if first is None and any(c["delta"].get("content") for c in chunk.get("choices", [])):
                    first = time.monotonic() - start
                usage = chunk.get("usage") or usage
    except httpx.HTTPError as exc:
        return Outcome(request.group, first, time.monotonic() - start, error=repr(exc))
    details = usage.get("prompt_tokens_details") or {}
    return Outcome(
        request.group,
        first,
        time.monotonic() - start,
        usage.get("prompt_tokens", 0),
        details.get("cached_tokens", 0),
        usage.get("completion_tokens", 0),
    )


async def _report(outcomes: list[Outcome], total: int) -> None:
    while True:
        await asyncio.sleep(2)
        print(f"  {len(outcomes)}/{total} requests done", file=sys.stderr, flush=True)
