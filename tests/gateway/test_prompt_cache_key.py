"""``prompt_cache_key`` has one meaning on every front: a routing hint combined with the prefix hash.
A prompt no worker holds goes to the key's home worker (reason ``pinned``) whether it arrives as an
OpenAI chat or completion, a Responses request, an Anthropic message (the same field, as an
extension), a gRPC request, or is only routed dry (``/v1/route``, gRPC ``Route``); a worker holding
a longer prefix still wins (``cache_hit``), and the dry run says so as the request then does; one
check of the key (length, Unicode) refuses alike on every front; ``user`` and ``metadata.user_id``
name the caller and route nothing."""

from __future__ import annotations

import uuid
from collections.abc import Callable

import grpc
import httpx
import pytest

from kvgate.common.tokenizer import Tokenizer
from kvgate.gateway.core.cache_key import MAX_CACHE_KEY_CHARS
from kvgate.gateway.core.request import GenerateRequest, TextInput
from kvgate.gateway.errors import ErrorKind, GatewayError
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
                answer = {"model": MODEL, "max_output_tokens": 2, "prompt_cache_key": key, "input": _fresh()}
                assert (await http.post("/v1/responses", json=answer)).status_code == 200
                assert served() == home
                request = gateway_pb2.GatewayRequest(model=MODEL, prompt=_fresh(), prompt_cache_key=key)
                request.sampling.max_tokens = 2
                async for _ in stub.Generate(request):
                    pass
                assert served() == home
                request.prompt = _fresh()
                route = await stub.Route(request)
                assert (route.chosen_worker, route.reason) == (home, gateway_pb2.ROUTE_REASON_PINNED)


async def test_the_user_names_the_caller_and_routes_nothing(tokenizer: Tokenizer) -> None:
    """The same ``user`` / ``metadata.user_id`` on every request pins nothing: fresh prompts sent
    through one front still spread over both workers. Each front gets a run of its own: new prompts
    of one size are placed where they cost the least, which can alternate between the workers, so
    interleaving the fronts could put every message on one worker and every chat on the other."""

    def message() -> dict[str, object]:
        return {"model": MODEL, "max_tokens": 2, "metadata": {"user_id": "one-user"},
                "messages": [{"role": "user", "content": _fresh()}]}  # fmt: skip

    def chat() -> dict[str, object]:
        return {"model": MODEL, "max_tokens": 2, "user": "one-user",
                "messages": [{"role": "user", "content": _fresh()}]}  # fmt: skip

    runs = {"/v1/messages": message, "/v1/chat/completions": chat}
    async with running_gateway(tokenizer) as live:
        served = _served_by(live)
        async with httpx.AsyncClient(base_url=live.url, timeout=30) as http:
            for path, body in runs.items():
                workers = set()
                for _ in range(12):
                    assert (await http.post(path, json=body())).status_code == 200
                    workers.add(served())
                assert workers == {w.worker_id for w in live.workers}, path


async def test_a_longer_prefix_beats_the_key_and_the_dry_run_predicts_both(tokenizer: Tokenizer) -> None:
    """A prompt sent with one key is cached on that key's home; the same prompt, extended, with a key
    whose home is the other worker goes where the prefix is (``cache_hit``): the key only chooses
    between workers that hold as much. Each time the dry run names the worker and the reason the
    request then gets."""
    async with running_gateway(tokenizer) as live:
        ids = [WorkerId(w.worker_id) for w in live.workers]
        first = next(k for k in KEYS if home_worker(k, ids) == ids[0])
        other = next(k for k in KEYS if home_worker(k, ids) == ids[1])
        served = _served_by(live)
        opening = _fresh()
        async with httpx.AsyncClient(base_url=live.url, timeout=30) as http:
            for key, prompt, expected in (
                (first, opening, (ids[0], "pinned")),  # nothing cached: the key decides
                (other, opening + " And then some more words.", (ids[0], "cache_hit")),  # the prefix does
                (other, _fresh(), (ids[1], "pinned")),
            ):
                chat = {"model": MODEL, "max_tokens": 2, "prompt_cache_key": key,
                        "messages": [{"role": "user", "content": prompt}]}  # fmt: skip
                dry = (await http.post("/v1/route", json=chat)).json()
                reply = (await http.post("/v1/chat/completions", json=chat)).json()
                assert (dry["chosen_worker"], dry["reason"]) == expected
                assert (served(), reply["kvgate"]["route_reason"]) == expected


async def test_one_check_of_the_key_on_every_front(tokenizer: Tokenizer) -> None:
    """A key longer than the core's bound is refused by every front alike, naming the field (the
    gRPC front had no bound); an empty key is no key: the request is served."""
    long_key = "k" * (MAX_CACHE_KEY_CHARS + 1)
    bodies = {
        "/v1/chat/completions": {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 2},
        "/v1/completions": {"prompt": "Hi", "max_tokens": 2},
        "/v1/route": {"prompt": "Hi"},
        "/v1/responses": {"input": "Hi", "max_output_tokens": 2},
        "/v1/messages": {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 2},
    }
    async with (
        running_gateway(tokenizer) as live,
        grpc_front(live) as target,
        httpx.AsyncClient(base_url=live.url, timeout=30) as http,
        grpc.aio.insecure_channel(target) as channel,
    ):
        for path, body in bodies.items():
            refused = await http.post(path, json={"model": MODEL, "prompt_cache_key": long_key, **body})
            assert refused.status_code == 400, path
            error = refused.json()["error"]
            assert "prompt_cache_key" in (error.get("param") or error["message"]), (path, error)
            assert (await http.post(path, json={"model": MODEL, "prompt_cache_key": "", **body})).is_success
        stub = gateway_pb2_grpc.KVGatewayStub(channel)
        request = gateway_pb2.GatewayRequest(model=MODEL, prompt="Hi", prompt_cache_key=long_key)
        request.sampling.max_tokens = 2
        for call in (stub.Route, stub.Generate):
            with pytest.raises(grpc.aio.AioRpcError) as refused_call:
                await _finish(call(request))
            assert refused_call.value.code() == grpc.StatusCode.INVALID_ARGUMENT
            assert "prompt_cache_key" in (refused_call.value.details() or "")


def test_the_core_check_bounds_the_key_and_empty_is_none() -> None:
    prompt, longest = TextInput("Hi"), "k" * MAX_CACHE_KEY_CHARS
    assert GenerateRequest(MODEL, prompt, cache_key="").cache_key is None
    assert GenerateRequest(MODEL, prompt, cache_key=longest).cache_key == longest
    for bad in (longest + "k", "tenant-\ud800"):
        with pytest.raises(GatewayError) as refused:
            GenerateRequest(MODEL, prompt, cache_key=bad)
        assert (refused.value.kind, refused.value.param) == (ErrorKind.INVALID_REQUEST, "prompt_cache_key")


async def _finish(call: object) -> None:
    """Awaits a unary call or drains a streaming one."""
    if hasattr(call, "__aiter__"):
        async for _ in call:  # type: ignore[attr-defined]
            pass
    else:
        await call  # type: ignore[misc]
