"""The public gRPC service, driven by a real grpc.aio client: streaming, cached tokens, deadlines,
cancellation, errors as statuses, health and reflection."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

from kvgate.proto import common_pb2, gateway_pb2, gateway_pb2_grpc
from tests.gateway.test_openai_api import LONG_SYSTEM
from tests.support.live_gateway import MODEL, LiveGateway, grpc_front
from tests.support.scripted_worker import Mode


@pytest.fixture
async def channel(live: LiveGateway) -> AsyncIterator[grpc.aio.Channel]:
    async with grpc_front(live) as target, grpc.aio.insecure_channel(target) as chan:
        yield chan


def request(question: str, max_tokens: int = 4, model: str = MODEL) -> gateway_pb2.GatewayRequest:
    chat = gateway_pb2.ChatMessages(
        messages=[
            gateway_pb2.ChatMessage(role="system", content=LONG_SYSTEM),
            gateway_pb2.ChatMessage(role="user", content=question),
        ]
    )
    return gateway_pb2.GatewayRequest(
        model=model, chat=chat, sampling=common_pb2.SamplingParams(max_tokens=max_tokens)
    )


def constrained(schema: str) -> gateway_pb2.GatewayRequest:
    req = request("json please")
    req.sampling.constraint.CopyFrom(
        common_pb2.OutputConstraint(kind=common_pb2.CONSTRAINT_KIND_JSON_SCHEMA, spec=schema)
    )
    return req


async def generate(channel: grpc.aio.Channel, req: gateway_pb2.GatewayRequest) -> list:
    return [m async for m in gateway_pb2_grpc.KVGatewayStub(channel).Generate(req)]


async def test_generate_streams_deltas_then_a_final_with_cached_tokens(channel: grpc.aio.Channel) -> None:
    first = await generate(channel, request("one"))
    second = await generate(channel, request("two"))
    assert [m.WhichOneof("kind") for m in first][-1] == "final"
    assert all(m.WhichOneof("kind") == "delta" for m in first[:-1])
    assert sum(len(m.delta.token_ids) for m in first[:-1]) == 4
    final = second[-1].final
    assert final.usage.completion_tokens == 4
    assert final.usage.prompt_tokens == 376  # 2 full chunks, both inside the shared system prompt
    assert final.usage.cached_tokens == 2 * 128
    assert final.route_reason == gateway_pb2.ROUTE_REASON_CACHE_HIT
    assert final.worker_id == first[-1].final.worker_id


async def test_route_is_a_dry_run(channel: grpc.aio.Channel) -> None:
    stub = gateway_pb2_grpc.KVGatewayStub(channel)
    await generate(channel, request("warm"))
    decision = await stub.Route(request("other"))
    assert decision.reason == gateway_pb2.ROUTE_REASON_CACHE_HIT
    assert decision.matches[0].gpu_chunks == 2
    assert decision.chunk_size == 128


async def test_an_empty_model_and_unset_max_tokens_take_the_proto_defaults(channel: grpc.aio.Channel) -> None:
    """``model`` empty = the default model; ``max_tokens`` unset (no sampling at all, or sampling
    without it) = 16, not a context window's worth."""
    bare = gateway_pb2.GatewayRequest(prompt="count to a thousand:")
    with_sampling = gateway_pb2.GatewayRequest(
        prompt="and again:", sampling=common_pb2.SamplingParams(temperature=0.0)
    )
    for req in (bare, with_sampling):
        final = (await generate(channel, req))[-1].final
        assert final.usage.completion_tokens == 16
    models = await gateway_pb2_grpc.KVGatewayStub(channel).ListModels(gateway_pb2.ListModelsRequest())
    assert [m.id for m in models.models] == [MODEL]


async def test_route_names_the_worker_the_next_generate_goes_to(channel: grpc.aio.Channel) -> None:
    """On an idle cluster, nothing changing in between: Route predicts Generate, prompt after prompt."""
    stub = gateway_pb2_grpc.KVGatewayStub(channel)
    for i in range(8):
        short = request(f"question {i}")  # distinct prompts: ties between the workers, broken alike
        short.chat.messages[0].content = "Be brief."  # under one chunk: no cached prefix decides it
        predicted = (await stub.Route(short)).chosen_worker
        assert (await generate(channel, short))[-1].final.worker_id == predicted


async def test_generate_and_route_return_the_request_id_as_trailing_metadata(
    channel: grpc.aio.Channel,
) -> None:
    stub = gateway_pb2_grpc.KVGatewayStub(channel)
    call = stub.Generate(request("id"))
    messages = [m async for m in call]
    assert ("x-request-id", messages[-1].final.request_id) in tuple(await call.trailing_metadata())
    assert dict(await call.initial_metadata())["x-request-id"] == messages[-1].final.request_id
    route = stub.Route(request("id"))
    await route
    assert dict(await route.trailing_metadata())["x-request-id"]
    mine = request("mine")
    mine.request_id = "client-chosen-7"
    call = stub.Generate(mine)
    assert [m async for m in call][-1].final.request_id == "client-chosen-7"  # echoed, as the .proto says
    trailing = dict(await call.trailing_metadata())
    assert trailing["x-client-request-id"] == "client-chosen-7"
    assert (
        trailing["x-request-id"] == dict(await call.initial_metadata())["x-request-id"] != "client-chosen-7"
    )
    assert len(trailing["x-request-id"]) == 32  # the gateway's own id, the diagnosis key, never the client's


async def test_the_callers_deadline_is_honoured(live: LiveGateway, channel: grpc.aio.Channel) -> None:
    for worker in live.workers:
        worker.mode = Mode.STALL
    start = time.monotonic()
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await gateway_pb2_grpc.KVGatewayStub(channel).Generate(request("x"), timeout=0.5).read()
    assert err.value.code() is grpc.StatusCode.DEADLINE_EXCEEDED
    assert time.monotonic() - start < 3


async def test_cancelling_the_call_aborts_the_worker(live: LiveGateway, channel: grpc.aio.Channel) -> None:
    for worker in live.workers:
        worker.token_delay_s = 0.05
    call = gateway_pb2_grpc.KVGatewayStub(channel).Generate(request("long", max_tokens=200))
    await call.read()
    call.cancel()
    for _ in range(100):
        if any(w.cancelled for w in live.workers):
            break
        await asyncio.sleep(0.02)
    assert sum(len(w.cancelled) for w in live.workers) == 1


@pytest.mark.parametrize(
    ("req", "code"),
    [
        (request("x", model="nope"), grpc.StatusCode.NOT_FOUND),
        (gateway_pb2.GatewayRequest(model=MODEL), grpc.StatusCode.INVALID_ARGUMENT),
        (request("x", max_tokens=100_000), grpc.StatusCode.INVALID_ARGUMENT),
        (constrained('{"not": {}}'), grpc.StatusCode.INVALID_ARGUMENT),
        (constrained("{oops"), grpc.StatusCode.INVALID_ARGUMENT),
    ],
    ids=["model", "no-input", "max-tokens", "uncompilable-constraint", "constraint-not-json"],
)
async def test_bad_requests_are_statuses_with_messages(
    channel: grpc.aio.Channel, req: gateway_pb2.GatewayRequest, code: grpc.StatusCode
) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await generate(channel, req)
    assert err.value.code() is code
    assert err.value.details()


async def test_an_output_constraint_is_checked_and_passed_on(channel: grpc.aio.Channel) -> None:
    answer = await generate(channel, constrained('{"type": "object"}'))
    assert answer[-1].WhichOneof("kind") == "final"
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await generate(channel, constrained('{"type": "integer", "minimum": 2, "maximum": 1}'))
    assert "sampling.constraint" in refused.value.details()
    assert "Unsatisfiable schema" in refused.value.details()


async def test_one_body_limit_for_http_and_grpc(live: LiveGateway, channel: grpc.aio.Channel) -> None:
    """A request message over the HTTP front's body limit is refused by gRPC before it is parsed;
    one just under it gets as far as the context-window check."""
    limit = live.gateway.settings.limits.max_body_bytes
    over = gateway_pb2.GatewayRequest(model=MODEL, prompt="a" * limit)
    under = gateway_pb2.GatewayRequest(model=MODEL, prompt="a" * (limit - 64))
    assert over.ByteSize() > limit >= under.ByteSize()
    with pytest.raises(grpc.aio.AioRpcError) as too_large:
        await generate(channel, over)
    with pytest.raises(grpc.aio.AioRpcError) as too_long:
        await generate(channel, under)
    assert too_large.value.code() is grpc.StatusCode.RESOURCE_EXHAUSTED
    assert too_long.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert "context length" in too_long.value.details()


async def test_health_reflection_and_models(channel: grpc.aio.Channel) -> None:
    health = await health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest())
    assert health.status == health_pb2.HealthCheckResponse.SERVING
    models = await gateway_pb2_grpc.KVGatewayStub(channel).ListModels(gateway_pb2.ListModelsRequest())
    assert [(m.id, m.ready_workers) for m in models.models] == [(MODEL, 2)]
    stub = reflection_pb2_grpc.ServerReflectionStub(channel)
    replies = stub.ServerReflectionInfo(iter([reflection_pb2.ServerReflectionRequest(list_services="")]))
    services = [s.name async for reply in replies for s in reply.list_services_response.service]
    assert "kvgate.v1.KVGateway" in services
