"""The dispatch tests' cluster: three scripted gRPC workers on loopback behind a real directory,
router, channel pool and dispatcher over an in-process index; and small job helpers."""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass

import numpy as np
import pytest

from kvgate.common.clock import SystemClock
from kvgate.gateway.routing import get_policy
from kvgate.gateway.routing.presumption import HomePresumption
from kvgate.gateway.routing.router import Router
from kvgate.gateway.upstream.channels import ChannelPool
from kvgate.gateway.upstream.directory import WorkerDirectory
from kvgate.gateway.upstream.dispatch import Dispatcher
from kvgate.gateway.upstream.job import Done, Job, Tokens
from kvgate.index import IndexSettings, MemoryPrefixIndex
from kvgate.proto.hashing import chunk_hashes
from kvgate.proto.ids import WorkerId
from kvgate.proto.layout import CacheLayout
from kvgate.proto.sampling import SamplingParams
from tests.support.scripted_worker import ScriptedWorker

CONFIG = CacheLayout("test-model")


@dataclass
class Cluster:
    workers: list[ScriptedWorker]
    dispatcher: Dispatcher
    directory: WorkerDirectory
    index: MemoryPrefixIndex
    channels: ChannelPool
    router: Router
    presumption: HomePresumption

    def worker(self, worker_id: str) -> ScriptedWorker:
        return next(w for w in self.workers if w.worker_id == worker_id)


@pytest.fixture
async def cluster() -> AsyncIterator[Cluster]:
    index = MemoryPrefixIndex(IndexSettings(), SystemClock())
    workers = [await ScriptedWorker(WorkerId(f"w{i}"), CONFIG, index).start() for i in range(3)]
    directory = WorkerDirectory(index, CONFIG.fingerprint())
    await directory.refresh()
    presumption = HomePresumption()
    router = Router(
        index, get_policy("kvgate"), get_policy("least_loaded"), CONFIG.chunk_size, 2.0, SystemClock(),
        presumption=presumption,
    )  # fmt: skip
    channels = ChannelPool()
    dispatcher = Dispatcher(directory, router, channels, index)
    yield Cluster(workers, dispatcher, directory, index, channels, router, presumption)
    await channels.close()
    for worker in workers:
        await worker.stop()


def job(tokens: int = 1000, seed: int = 0, max_tokens: int = 4, deadline_s: float | None = None) -> Job:
    ids = np.random.default_rng(seed).integers(0, 900, tokens).astype(np.uint32)
    hashes = chunk_hashes(ids, CONFIG.root().digest(), CONFIG.chunk_size)
    deadline = time.monotonic() + deadline_s if deadline_s else None
    return Job(
        uuid.uuid4().hex,
        ids,
        hashes,
        SamplingParams(max_tokens=max_tokens),
        request_key=seed,
        deadline_s=deadline,
    )


async def collect(dispatcher: Dispatcher, j: Job) -> tuple[list[int], Done]:
    tokens: list[int] = []
    async for item in dispatcher.stream(j):
        if isinstance(item, Tokens):
            tokens.extend(item.token_ids)
        else:
            return tokens, item
    raise AssertionError("no Done")
