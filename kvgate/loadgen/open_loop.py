"""Open-loop load: requests start on a Poisson schedule at a fixed rate whatever the answers, so an
overloaded server cannot slow the arrivals down (closed-loop clients would hide overload).

Every request's outcome is kept: status, seconds to the full answer, and whether a refusal carried
``Retry-After``. Transport failures are recorded with status 0, so nothing is silently lost.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httpx


@dataclass(frozen=True, slots=True)
class Outcome:
    """One request: when it started (s from the run's start), its status (0: no HTTP answer), its
    latency in seconds, and whether it carried Retry-After."""

    started_s: float
    status: int
    latency_s: float
    retry_after: bool


async def open_loop(
    client: httpx.AsyncClient,
    path: str,
    body: Callable[[int], dict[str, Any]],
    rate_per_s: float,
    duration_s: float,
    seed: int = 0,
) -> list[Outcome]:
    """POSTs ``body(i)`` to ``path`` at ``rate_per_s`` (exponential gaps) for ``duration_s``; returns
    every outcome once all requests have finished (each bounded by the client's timeout)."""
    if rate_per_s <= 0 or duration_s <= 0:
        raise ValueError("rate_per_s and duration_s must be positive")
    rng = random.Random(seed)
    start = time.monotonic()
    tasks: list[asyncio.Task[Outcome]] = []
    at = 0.0
    while (at := at + rng.expovariate(rate_per_s)) < duration_s:
        await asyncio.sleep(max(0.0, start + at - time.monotonic()))
        tasks.append(asyncio.create_task(_one(client, path, body(len(tasks)), start)))
    return list(await asyncio.gather(*tasks))


async def _one(client: httpx.AsyncClient, path: str, payload: dict[str, Any], origin: float) -> Outcome:
    began = time.monotonic()
    try:
        reply = await client.post(path, json=payload)
        status, retry = reply.status_code, "retry-after" in reply.headers
    except httpx.HTTPError:
        status, retry = 0, False
    return Outcome(began - origin, status, time.monotonic() - began, retry)
