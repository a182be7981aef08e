"""Generate over real gRPC against a real engine on the tiny model: streaming, parity with the engine's
own run, cached tokens, validation, admission, cancellation, deadlines, Abort and Stats."""

from __future__ import annotations

import asyncio
from pathlib import Path

import grpc
import numpy as np
import pytest

from kvgate.common.tokenizer import load_tokenizer
from kvgate.proto import common_pb2, worker_pb2
from kvgate.proto.sampling import FinishReason, SamplingParams
from kvgate.workers.engine import EngineRequest, load_engine, run_to_completion
from kvgate.workers.kv import StepEventPublisher
from tests.support.real_workers import StartWorker
from tests.workers.service.helpers import (
    MAX_MODEL_LEN,
    client,
    engine_is_idle,
    engine_loop,
    eventually,
    generate_request,
    greedy,
    prompt,
    read_generation,
    stalled,
    worker_config,
)


async def test_generate_streams_tokens_then_a_final_equal_to_the_engines_own_run(
    start_worker: StartWorker, tiny_chat_model: Path
) -> None:
    ids = prompt(40)
    worker = await start_worker()
    async with client(worker.info.address) as stub:
        got = await read_generation(stub.Generate(generate_request(ids, "r1", greedy(12))))

    config = worker_config(tiny_chat_model)
    engine = load_engine(tiny_chat_model, config.engine, StepEventPublisher(config.worker_id, config.epoch))
    request = EngineRequest("r1", np.asarray(ids, dtype=np.uint32), greedy(12))
    want = run_to_completion(engine, [request])["r1"]
    assert got.tokens == list(want.token_ids)
    assert len(got.batches) == 12  # one batch per decode step of this request
    assert got.finish_reason is FinishReason.LENGTH
    assert (got.usage.prompt_tokens, got.usage.completion_tokens, got.usage.cached_tokens) == (40, 12, 0)


async def test_a_repeated_long_prompt_reports_gpu_cached_tokens(start_worker: StartWorker) -> None:
    ids = prompt(300)
    worker = await start_worker()
    async with client(worker.info.address) as stub:
        first = await read_generation(stub.Generate(generate_request(ids, "a", greedy(4))))
        second = await read_generation(stub.Generate(generate_request(ids, "b", greedy(4))))
        stats = await stub.Stats(worker_pb2.StatsRequest())
    assert first.usage.cached_tokens == 0
    # every full block but the one holding the last prompt token (whose logits are needed)
    assert second.usage.cached_gpu_tokens == second.usage.cached_tokens == 288
    assert second.tokens == first.tokens
    assert (stats.requests_total, stats.prompt_tokens_total, stats.cached_gpu_tokens_total) == (2, 600, 288)
    assert stats.finished_length_total == 2
    assert stats.completion_tokens_total == 8
    assert stats.info.worker_id == "worker-0"
    assert stats.info.address == worker.info.address
    assert stats.load.gpu_blocks_total == stats.load.gpu_blocks_free == 64
    assert stats.gpu_cached_blocks > 0
    assert stats.last_event_seq > 0


async def test_a_stop_string_ends_the_stream_and_is_reported(
    start_worker: StartWorker, tiny_chat_model: Path
) -> None:
    ids = prompt(30, seed=3)
    worker = await start_worker()
    async with client(worker.info.address) as stub:
        free = await read_generation(stub.Generate(generate_request(ids, "free", greedy(30))))
        text = load_tokenizer(tiny_chat_model).decode(free.tokens, skip_special_tokens=True)
        stop = next(ch for ch in text if ch.isascii() and ch.isprintable())
        sampling = SamplingParams(temperature=0, max_tokens=30, stop=(stop,))
        stopped = await read_generation(stub.Generate(generate_request(ids, "stopped", sampling)))
    assert stopped.finish_reason is FinishReason.STOP
    assert stopped.matched_stop == stop
    assert stopped.tokens == free.tokens[: len(stopped.tokens)]  # the tokens are not trimmed
    assert len(stopped.tokens) < 30


def _constrained(kind: int, spec: str) -> worker_pb2.GenerateRequest:
    sampling = common_pb2.SamplingParams(constraint=common_pb2.OutputConstraint(kind=kind, spec=spec))
    return worker_pb2.GenerateRequest(request_id="c", prompt_token_ids=[1, 2], sampling=sampling)


@pytest.mark.parametrize(
    ("request_", "fragment"),
    [
        (generate_request([], "empty"), "prompt_token_ids"),
        (generate_request(prompt(MAX_MODEL_LEN), "long"), "at most 512 tokens"),
        (generate_request([1, 2, 320], "vocab"), "vocab size 320"),
        (generate_request([1, 2], ""), "request_id"),
        (
            worker_pb2.GenerateRequest(
                request_id="hot", prompt_token_ids=[1], sampling=common_pb2.SamplingParams(temperature=-1)
            ),
            "temperature",
        ),
        (
            worker_pb2.GenerateRequest(
                request_id="p", prompt_token_ids=[1], sampling=common_pb2.SamplingParams(top_p=2)
            ),
            "top_p",
        ),
        (_constrained(common_pb2.CONSTRAINT_KIND_JSON_SCHEMA, '{"not": {}}'), "cannot be compiled"),
        (_constrained(common_pb2.CONSTRAINT_KIND_JSON_SCHEMA, '{"type": "str'), "not valid JSON"),
        (_constrained(common_pb2.CONSTRAINT_KIND_UNSPECIFIED, "{}"), "constraint kind"),
    ],
    ids=[
        "empty-prompt",
        "prompt-too-long",
        "out-of-vocab",
        "no-request-id",
        "temperature",
        "top-p",
        "uncompilable-schema",
        "schema-not-json",
        "constraint-kind-unset",
    ],
)
async def test_bad_requests_are_invalid_argument(
    start_worker: StartWorker, request_: worker_pb2.GenerateRequest, fragment: str
) -> None:
    worker = await start_worker()
    async with client(worker.info.address) as stub:
        with pytest.raises(grpc.aio.AioRpcError) as error:
            await read_generation(stub.Generate(request_))
    assert error.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert fragment in error.value.details()
    assert engine_loop(worker).in_flight == 0


async def test_a_full_admission_queue_answers_resource_exhausted(start_worker: StartWorker) -> None:
    worker = await start_worker(max_num_seqs=1, max_queued_requests=1)  # 2 requests at once
    loop = engine_loop(worker)
    async with client(worker.info.address) as stub:
        async with stalled(loop):
            admitted = [stub.Generate(generate_request(prompt(8), f"ok{i}")) for i in range(2)]
            readers = [asyncio.ensure_future(read_generation(call)) for call in admitted]
            await eventually(lambda: loop.in_flight == 2)
            with pytest.raises(grpc.aio.AioRpcError) as error:
                await read_generation(stub.Generate(generate_request(prompt(8), "third")))
            duplicate = stub.Generate(generate_request(prompt(8), "ok0"))
            with pytest.raises(grpc.aio.AioRpcError) as again:
                await read_generation(duplicate)
        done = await asyncio.gather(*readers)
    assert error.value.code() is grpc.StatusCode.RESOURCE_EXHAUSTED
    assert again.value.code() is grpc.StatusCode.ALREADY_EXISTS
    assert [d.finish_reason for d in done] == [FinishReason.LENGTH] * 2


async def test_cancelling_the_call_aborts_the_sequence_and_frees_blocks(start_worker: StartWorker) -> None:
    worker = await start_worker()
    loop = engine_loop(worker)
    async with client(worker.info.address) as stub:
        call = stub.Generate(generate_request(prompt(100), "long", greedy(400)))
        first = await anext(aiter(call))
        assert first.tokens.token_ids
        call.cancel()
        await eventually(lambda: loop.call(engine_is_idle))
        stats = await stub.Stats(worker_pb2.StatsRequest())
    assert stats.finished_abort_total == 1
    assert stats.completion_tokens_total < 400
    assert loop.in_flight == 0


async def test_the_deadline_fires_and_aborts_the_request(start_worker: StartWorker) -> None:
    worker = await start_worker()
    loop = engine_loop(worker)
    async with client(worker.info.address) as stub:
        async with stalled(loop):
            with pytest.raises(grpc.aio.AioRpcError) as error:
                await read_generation(stub.Generate(generate_request(prompt(20), "late"), timeout=0.3))
        await eventually(lambda: loop.call(engine_is_idle))
        stats = await stub.Stats(worker_pb2.StatsRequest())
    assert error.value.code() is grpc.StatusCode.DEADLINE_EXCEEDED
    assert stats.finished_abort_total == 1
    assert loop.in_flight == 0


async def test_abort_ends_the_stream_with_an_abort_final(start_worker: StartWorker) -> None:
    worker = await start_worker()
    async with client(worker.info.address) as stub:
        async with stalled(engine_loop(worker)):
            reader = asyncio.ensure_future(read_generation(stub.Generate(generate_request(prompt(9), "x"))))
            await eventually(lambda: engine_loop(worker).in_flight == 1)
            assert (await stub.Abort(worker_pb2.AbortRequest(request_id="x"))).aborted
        got = await reader
        unknown = await stub.Abort(worker_pb2.AbortRequest(request_id="x"))
    assert got.finish_reason is FinishReason.ABORT
    assert got.tokens == []
    assert not unknown.aborted
