"""A worker fetches a prompt's cached prefix KV from another worker instead of computing it, with
real workers on the tiny model over real gRPC (the deployment's call token on every link).

Worker A computes a prompt; worker B, asked for the same prompt with ``kv_source`` naming A, imports
A's KV of the prompt's 18 reusable blocks (two export batches) and reuses them as GPU hits: its usage
reports them cached, and its greedy tokens equal A's and those of a worker that computed everything,
so the imported KV is the real KV. A fetch that fails (nobody listening) still answers, computing the
prompt; ExportKV refuses another model's fingerprint and a malformed request.
"""

from __future__ import annotations

import grpc
import numpy as np
import pytest

from kvgate.proto import worker_pb2
from kvgate.workers.engine import EngineRequest, LLMEngine
from kvgate.workers.service import WorkerServer
from tests.support.real_workers import StartWorker
from tests.workers.model.conftest import one_torch_thread  # noqa: F401 -- autouse: a real engine runs here
from tests.workers.service.helpers import Generated, client, generate_request, greedy, prompt, read_generation

PROMPT = prompt(300, seed=7)  # 18 full blocks before the last token (16 tokens per block)
REUSABLE = 288
DEAD_ADDRESS = "127.0.0.1:9"  # the discard port: nobody serves gRPC there


async def generate(
    worker: WorkerServer, request_id: str, source: worker_pb2.KVSource | None = None
) -> Generated:
    request = generate_request(PROMPT, request_id, greedy(12))
    if source is not None:
        request.kv_source.CopyFrom(source)
    async with client(worker.info.address) as stub:
        return await read_generation(stub.Generate(request, timeout=60))


async def stats(worker: WorkerServer) -> worker_pb2.StatsResponse:
    async with client(worker.info.address) as stub:
        return await stub.Stats(worker_pb2.StatsRequest())


async def kv_of(worker: WorkerServer) -> list[bytes]:
    """The KV bytes of PROMPT's cached blocks on ``worker``, each found by the worker's own hashes."""
    request = EngineRequest("probe", np.asarray(PROMPT, dtype=np.uint32))

    def read(engine: LLMEngine) -> list[bytes]:
        keyed, _ = engine.transfer_prompt(request)
        return [block.data for block in engine.export_kv(keyed, 0, REUSABLE // 16)]

    assert worker.loop is not None
    return await worker.loop.call(read)


def source_of(worker: WorkerServer, tokens: int = REUSABLE) -> worker_pb2.KVSource:
    assert worker.info is not None
    return worker_pb2.KVSource(worker_id=worker.info.worker_id, address=worker.info.address, tokens=tokens)


async def test_a_fetched_prefix_is_reused_and_is_the_real_kv(start_worker: StartWorker) -> None:
    a = await start_worker(worker_id="worker-a")
    b = await start_worker(worker_id="worker-b")
    computed = await generate(a, "prime")
    assert computed.usage.cached_tokens == 0

    fetched = await generate(b, "fetch", source_of(a))
    assert fetched.usage.cached_tokens == fetched.usage.cached_gpu_tokens == REUSABLE
    assert fetched.tokens == computed.tokens
    # Every block B caches under its own hash holds exactly A's KV of that block.
    b_kv = await kv_of(b)
    assert len(b_kv) == 18
    assert b_kv == await kv_of(a)

    c = await start_worker(worker_id="worker-c")
    alone = await generate(c, "alone")  # no fetch: everything computed on a third worker
    assert alone.usage.cached_tokens == 0
    assert fetched.tokens == alone.tokens
    assert b_kv == await kv_of(c)  # the same KV as computed here

    b_stats, a_stats = await stats(b), await stats(a)
    assert (b_stats.kv_imported_blocks_total, b_stats.kv_imported_tokens_total) == (18, REUSABLE)
    assert b_stats.kv_fetch_failures_total == 0
    assert a_stats.kv_exported_blocks_total == 18

    # B holds the prefix now: a second request names A again, but nothing is fetched.
    again = await generate(b, "again", source_of(a))
    assert again.usage.cached_tokens == REUSABLE
    assert (await stats(a)).kv_exported_blocks_total == 18


async def test_a_failed_fetch_computes_the_prompt_and_is_counted(start_worker: StartWorker) -> None:
    b = await start_worker(worker_id="worker-b", kv_fetch_timeout_s=5.0)
    dead = worker_pb2.KVSource(worker_id="worker-a", address=DEAD_ADDRESS, tokens=REUSABLE)
    reply = await generate(b, "dead", dead)
    assert reply.usage.cached_tokens == 0
    assert len(reply.tokens) == 12
    counted = await stats(b)
    assert counted.kv_fetch_failures_total == 1
    assert counted.kv_imported_blocks_total == 0


async def test_a_source_short_of_the_prefix_imports_what_it_holds(start_worker: StartWorker) -> None:
    a = await start_worker(worker_id="worker-a")
    b = await start_worker(worker_id="worker-b")
    short = PROMPT[:100]  # A holds 6 blocks of PROMPT's prefix (96 tokens)
    async with client(a.info.address) as stub:
        await read_generation(stub.Generate(generate_request(short, "short", greedy(1)), timeout=60))
    fetched = await generate(b, "fetch", source_of(a))
    assert fetched.usage.cached_tokens == 96
    assert (await stats(b)).kv_fetch_failures_total == 0


async def test_export_refuses_another_models_fingerprint_and_a_malformed_request(
    start_worker: StartWorker,
) -> None:
    a = await start_worker(worker_id="worker-a")
    assert a.info is not None
    request = worker_pb2.ExportKVRequest(prompt_token_ids=PROMPT, max_tokens=REUSABLE)
    other_model = worker_pb2.ExportKVRequest(
        prompt_token_ids=PROMPT, max_tokens=REUSABLE, fingerprint="other"
    )
    async with client(a.info.address) as stub:
        with pytest.raises(grpc.aio.AioRpcError) as other:
            async for _ in stub.ExportKV(other_model):
                pass
        assert other.value.code() is grpc.StatusCode.FAILED_PRECONDITION
        with pytest.raises(grpc.aio.AioRpcError) as empty:
            async for _ in stub.ExportKV(worker_pb2.ExportKVRequest(fingerprint=a.info.fingerprint)):
                pass
        assert empty.value.code() is grpc.StatusCode.INVALID_ARGUMENT
        partial = worker_pb2.ExportKVRequest(
            prompt_token_ids=PROMPT, max_tokens=REUSABLE, fingerprint=a.info.fingerprint,
            shared_salt="manual", shared_tokens=7,
        )  # fmt: skip
        with pytest.raises(grpc.aio.AioRpcError) as unhashable:
            async for _ in stub.ExportKV(partial):
                pass
        assert unhashable.value.code() is grpc.StatusCode.INVALID_ARGUMENT
        assert "multiple" in (unhashable.value.details() or "")
        # The right fingerprint and nothing cached: the stream just ends.
        request.fingerprint = a.info.fingerprint
        assert [block async for block in stub.ExportKV(request)] == []
