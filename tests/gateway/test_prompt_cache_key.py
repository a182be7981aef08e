"""``prompt_cache_key`` has one meaning on every front: a routing hint combined with the prefix hash.
A prompt no worker holds goes to the key's home worker (reason ``pinned``) whether it arrives as an
OpenAI chat or completion, an Anthropic message (the same field, as an extension), a gRPC request,
or is only routed dry (``/v1/route``); ``user`` and ``metadata.user_id`` name the caller and route
nothing."""

from __future__ import annotations

import uuid
from collections.abc import Callable

import grpc
import httpx

from kvgate.common.tokenizer import Tokenizer
from kvgate.gateway.routing.home import home_worker
from kvgate.proto import gateway_pb2, gateway_pb2_grpc
from kvgate.proto.ids import WorkerId
from tests.support.live_gateway import MODEL, LiveGateway, grpc_front, running_gateway

KEYS = [f"customer-{i}" for i in range(6)]


def _fresh() -> str:
    """A prompt of its own (nothing cached anywhere), longer than a chunk."""
    return f"{uuid.uuid4().hex} " + "Explain prefix caching in one line. " * 30


def _served_by(live: LiveGateway) -> Callable[[], WorkerId]:
    """A probe: the worker that received a request since the previous call."""
    seen = {w.worker_id: len(w.received) for w in live.workers}

    def probe() -> WorkerId:
        grown = [w.worker_id for w in live.workers if len(w.received) > seen[w.worker_id]]
        seen.update({w.worker_id: len(w.received) for w in live.workers})
        assert len(grown) == 1, grown
        return WorkerId(grown[0])

    return probe


async def test_a_new_prompt_goes_to_the_home_of_its_key_through_every_front(tokenizer: Tokenizer) -> None:
    async with running_gateway(tokenizer) as live, grpc_front(live) as target:
        ids = [WorkerId(w.worker_id) for w in live.workers]
        homes = {key: home_worker(key, ids) for key in KEYS}
        assert len(set(homes.values())) == 2  # both workers are some key's home: the test can tell
        served = _served_by(live)
        async with (
            httpx.AsyncClient(base_url=live.url, timeout=30) as http,
            grpc.aio.insecure_channel(target) as channel,
        ):
            stub = gateway_pb2_grpc.KVGatewayStub(channel)
            for key, home in homes.items():
                chat = {"model": MODEL, "max_tokens": 2, "prompt_cache_key": key,
                        "messages": [{"role": "user", "content": _fresh()}]}  # fmt: skip
                reply = (await http.post("/v1/chat/completions", json=chat)).json()
                assert (served(), reply["kvgate"]["route_reason"]) == (home, "pinned")
                completion = {"model": MODEL, "max_tokens": 2, "prompt_cache_key": key, "prompt": _fresh()}
                assert (await http.post("/v1/completions", json=completion)).status_code == 200
                assert served() == home
                message = {"model": MODEL, "max_tokens": 2, "prompt_cache_key": key,
                           "messages": [{"role": "user", "content": _fresh()}]}  # fmt: skip
                assert (await http.post("/v1/messages", json=message)).status_code == 200
                assert served() == home
                chat["messages"] = [{"role": "user", "content": _fresh()}]
                dry = (await http.post("/v1/route", json=chat)).json()
                assert (dry["chosen_worker"], dry["reason"]) == (home, "pinned")
                request = gateway_pb2.GatewayRequest(model=MODEL, prompt=_fresh(), prompt_cache_key=key)
                request.sampling.max_tokens = 2
                async for _ in stub.Generate(request):
                    pass
                assert served() == home


async def test_the_user_names_the_caller_and_routes_nothing(tokenizer: Tokenizer) -> None:
    """The same ``user`` / ``metadata.user_id`` on every request pins nothing: fresh prompts still
    spread over both workers."""
    async with running_gateway(tokenizer) as live:
        served = _served_by(live)
        by_message, by_chat = set(), set()
        async with httpx.AsyncClient(base_url=live.url, timeout=30) as http:
            for _ in range(12):
                message = {"model": MODEL, "max_tokens": 2, "metadata": {"user_id": "one-user"},
                           "messages": [{"role": "user", "content": _fresh()}]}  # fmt: skip
                assert (await http.post("/v1/messages", json=message)).status_code == 200
                by_message.add(served())
                chat = {"model": MODEL, "max_tokens": 2, "user": "one-user",
                        "messages": [{"role": "user", "content": _fresh()}]}  # fmt: skip
                assert (await http.post("/v1/chat/completions", json=chat)).status_code == 200
                by_chat.add(served())
        assert by_message == by_chat == {w.worker_id for w in live.workers}
