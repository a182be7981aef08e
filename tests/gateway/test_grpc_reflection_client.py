"""The gRPC contract as a client without kvgate's generated code sees it: message types come from the
gateway's reflection service only (as grpcurl-style tools work), and the .proto's promises hold: the
default model, the default max_tokens, the request id in trailing metadata, Route predicting Generate,
and the status codes the comments name."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import grpc
from google.protobuf import json_format, message_factory
from google.protobuf.descriptor_pool import DescriptorPool
from grpc_reflection.v1alpha.proto_reflection_descriptor_database import ProtoReflectionDescriptorDatabase

from tests.support.live_gateway import MODEL, LiveGateway
from tests.support.scripted_worker import Mode

SERVICE = "kvgate.v1.KVGateway"


class ReflectionClient:
    """Calls the gateway with message classes built from its reflection answers alone."""

    def __init__(self, grpc_target: str) -> None:
        self.channel = grpc.insecure_channel(grpc_target)
        pool = DescriptorPool(ProtoReflectionDescriptorDatabase(self.channel))
        self._service = pool.FindServiceByName(SERVICE)

    def _method(self, name: str) -> tuple[type, type]:
        method = self._service.FindMethodByName(name)
        return (message_factory.GetMessageClass(method.input_type),
                message_factory.GetMessageClass(method.output_type))  # fmt: skip

    def call(
        self, name: str, body: dict[str, Any], timeout_s: float = 30.0
    ) -> tuple[list[dict], dict[str, str]]:
        """The answers (as JSON objects) and the trailing metadata of ``name`` with ``body``."""
        request_type, response_type = self._method(name)
        request = json_format.ParseDict(body, request_type())
        streaming = self._service.FindMethodByName(name).server_streaming
        path = f"/{SERVICE}/{name}"
        make: Callable = self.channel.unary_stream if streaming else self.channel.unary_unary
        stub = make(path, request_serializer=request_type.SerializeToString,
                    response_deserializer=response_type.FromString)  # fmt: skip
        if streaming:
            call = stub(request, timeout=timeout_s)
            answers = [json_format.MessageToDict(m) for m in call]
        else:
            answer, call = stub.with_call(request, timeout=timeout_s)
            answers = [json_format.MessageToDict(answer)]
        return answers, dict(call.trailing_metadata() or ())


def _promises(grpc_target: str) -> dict[str, Any]:
    client = ReflectionClient(grpc_target)
    try:
        models, _ = client.call("ListModels", {})
        bare, trailing = client.call("Generate", {"prompt": "tell me about caches"})  # no model, no sampling
        agree = []
        for i in range(6):
            body = {"prompt": f"question number {i}", "sampling": {"maxTokens": 2}}
            (decision,), _ = client.call("Route", body)
            generated, _ = client.call("Generate", body)
            agree.append(decision["chosenWorker"] == generated[-1]["final"]["workerId"])
        codes = {}
        for name, body in {
            "unknown model": {"model": "nope", "prompt": "x"},
            "no input": {"model": MODEL},
        }.items():
            try:
                client.call("Generate", body)
            except grpc.RpcError as error:
                codes[name] = error.code()
        return {"models": models[0], "bare": bare, "trailing": trailing, "agree": agree, "codes": codes}
    finally:
        client.channel.close()


async def test_the_proto_promises_hold_for_a_reflection_only_client(grpc_target: str) -> None:
    seen = await asyncio.to_thread(_promises, grpc_target)
    assert [m["id"] for m in seen["models"]["models"]] == [MODEL]
    final = seen["bare"][-1]["final"]
    assert final["usage"]["completionTokens"] == 16  # unset max_tokens: the documented default
    assert seen["trailing"]["x-request-id"] == final["requestId"]
    assert all(seen["agree"])
    assert seen["codes"] == {
        "unknown model": grpc.StatusCode.NOT_FOUND,
        "no input": grpc.StatusCode.INVALID_ARGUMENT,
    }


def _deadline(grpc_target: str) -> grpc.StatusCode:
    client = ReflectionClient(grpc_target)
    try:
        client.call("Generate", {"prompt": "stall"}, timeout_s=0.5)
    except grpc.RpcError as error:
        return error.code()
    finally:
        client.channel.close()
    raise AssertionError("a stalled request finished")


async def test_a_call_past_its_deadline_ends_deadline_exceeded(live: LiveGateway, grpc_target: str) -> None:
    for worker in live.workers:
        worker.mode = Mode.STALL
    assert await asyncio.to_thread(_deadline, grpc_target) is grpc.StatusCode.DEADLINE_EXCEEDED
