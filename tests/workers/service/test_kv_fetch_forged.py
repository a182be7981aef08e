"""Only the deployment's secret can place KV in a worker's cache: a holder that relays another
worker's blocks with their data changed, or without their tags, is refused (the fetch fails, the
request computes its prompt and answers right); relayed untouched, the same blocks are taken."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

import grpc
import pytest

from kvgate.proto import worker_pb2, worker_pb2_grpc
from kvgate.workers.service import WorkerServer
from tests.support.real_workers import StartWorker
from tests.workers.model.conftest import one_torch_thread  # noqa: F401 -- autouse: a real engine runs here
from tests.workers.service.helpers import client
from tests.workers.service.test_kv_fetch_e2e import REUSABLE, generate, source_of, stats

Tamper = Callable[[worker_pb2.KVBlockData], worker_pb2.KVBlockData]


class Relay(worker_pb2_grpc.KVWorkerServicer):
    """A holder that asks worker ``origin`` for the blocks (it has the call token) and passes them on
    after ``tamper``: what a host that sniffed the token could serve."""

    def __init__(self, origin: str, tamper: Tamper) -> None:
        self._origin, self._tamper = origin, tamper

    async def ExportKV(  # noqa: N802 -- the RPC's name
        self, request: worker_pb2.ExportKVRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[worker_pb2.KVBlockData]:
        async with client(self._origin) as stub:
            async for block in stub.ExportKV(request):
                yield self._tamper(block)


async def relay_fetch(start_worker: StartWorker, tamper: Tamper) -> tuple[WorkerServer, int, list[int]]:
    """A computes the prompt; B fetches it through a relay of A's blocks: (B, B's cached tokens, B's
    tokens), with A's greedy tokens checked against B's."""
    a = await start_worker(worker_id="worker-a")
    b = await start_worker(worker_id="worker-b")
    computed = await generate(a, "prime")
    server = grpc.aio.server()
    worker_pb2_grpc.add_KVWorkerServicer_to_server(Relay(a.info.address, tamper), server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    try:
        source = source_of(a)
        source.address = f"127.0.0.1:{port}"
        fetched = await generate(b, "fetch", source)
    finally:
        await server.stop(0)
    assert fetched.tokens == computed.tokens  # right either way: forged KV is never used
    return b, fetched.usage.cached_tokens, fetched.tokens


def flip_data(block: worker_pb2.KVBlockData) -> worker_pb2.KVBlockData:
    data = bytearray(block.data)
    data[0] ^= 0xFF
    return worker_pb2.KVBlockData(
        index=block.index, block_hash=block.block_hash, data=bytes(data), mac=block.mac
    )


def drop_tag(block: worker_pb2.KVBlockData) -> worker_pb2.KVBlockData:
    return worker_pb2.KVBlockData(index=block.index, block_hash=block.block_hash, data=block.data)


@pytest.mark.parametrize("tamper", [flip_data, drop_tag], ids=["data-changed", "tag-dropped"])
async def test_a_tampered_block_is_refused(start_worker: StartWorker, tamper: Tamper) -> None:
    b, cached, _ = await relay_fetch(start_worker, tamper)
    assert cached == 0
    counted = await stats(b)
    assert counted.kv_fetch_failures_total == 1
    assert counted.kv_imported_blocks_total == 0


async def test_blocks_relayed_untouched_are_taken(start_worker: StartWorker) -> None:
    b, cached, _ = await relay_fetch(start_worker, lambda block: block)
    assert cached == REUSABLE
    assert (await stats(b)).kv_imported_blocks_total == REUSABLE // 16
