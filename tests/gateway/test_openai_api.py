"""The OpenAI-compatible API, driven by the official ``openai`` SDK against a real gateway."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

import httpx
import openai
import pytest

from kvgate.common.tokenizer import Tokenizer
from tests.support.live_gateway import MODEL, LiveGateway
from tests.support.scripted_worker import Mode

LONG_SYSTEM = "You are a meticulous assistant. " * 60  # ~400 tokens: 3 full chunks


@pytest.fixture
async def sdk(live: LiveGateway) -> AsyncIterator[openai.AsyncOpenAI]:
    async with openai.AsyncOpenAI(base_url=f"{live.url}/v1", api_key="unused", max_retries=0) as client:
        yield client


def chat(question: str) -> list[dict[str, str]]:
    return [{"role": "system", "content": LONG_SYSTEM}, {"role": "user", "content": question}]


async def test_models_lists_the_served_model(sdk: openai.AsyncOpenAI) -> None:
    models = await sdk.models.list()
    assert [m.id for m in models.data] == [MODEL]


async def test_chat_completion_reports_usage_and_cached_tokens_on_a_repeat(sdk: openai.AsyncOpenAI) -> None:
    first = await sdk.chat.completions.create(model=MODEL, messages=chat("What is 2+2?"), max_tokens=5)
    assert first.choices[0].finish_reason == "length"
    assert isinstance(first.choices[0].message.content, str)
    assert first.usage.completion_tokens == 5
    assert first.usage.prompt_tokens_details.cached_tokens == 0

    second = await sdk.chat.completions.create(model=MODEL, messages=chat("And 3+3?"), max_tokens=5)
    full_chunks = second.usage.prompt_tokens // 128
    shared_chunks = 3  # the long system prompt is shared; the question differs
    assert second.usage.prompt_tokens_details.cached_tokens == min(full_chunks, shared_chunks) * 128
    assert second.model_extra["kvgate"]["route_reason"] == "cache_hit"


async def test_streamed_chat_assembles_and_reports_usage_last(sdk: openai.AsyncOpenAI) -> None:
    stream = await sdk.chat.completions.create(
        model=MODEL,
        messages=chat("Count."),
        max_tokens=6,
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = [c async for c in stream]
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    finals = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
    assert finals == ["length"]
    assert chunks[-1].choices == []
    assert chunks[-1].usage.completion_tokens == 6
    assert isinstance(text, str)


async def test_a_chat_without_max_tokens_gets_the_room_left(sdk: openai.AsyncOpenAI) -> None:
    reply = await sdk.chat.completions.create(model=MODEL, messages=chat("Go on."))
    assert reply.usage.completion_tokens == 512  # the output limit (the context has more room)


async def test_completions_stream_and_not(sdk: openai.AsyncOpenAI) -> None:
    plain = await sdk.completions.create(model=MODEL, prompt="Once upon a time", max_tokens=3)
    assert plain.usage.completion_tokens == 3
    streamed = await sdk.completions.create(model=MODEL, prompt=[1, 2, 3], max_tokens=3, stream=True)
    finals = [c.choices[0].finish_reason async for c in streamed if c.choices]
    assert finals[-1] == "length"


@pytest.mark.parametrize(
    ("kwargs", "status", "param", "fragment"),
    [
        ({"model": "gpt-5"}, 404, "model", "does not exist. This server serves: `smollm2`"),
        ({"temperature": 7}, 400, "temperature", "expected a value <= 2, but got 7"),
        ({"n": 9}, 400, "n", "`n` > 8 is not supported by this server"),
        ({"max_tokens": 100_000}, 400, "max_tokens", "at most 512 fit"),
        ({"stop": [""]}, 400, "stop", "1 to 256 characters"),
        ({"extra_body": {"bogus_field": 1}}, 400, "bogus_field", "Unrecognized request argument supplied"),
        ({"messages": [{"role": "wizard", "content": "hi"}]}, 400, "messages.0.role", "Supported values"),
        (
            {"messages": [{"role": "user", "content": "word " * 5000}]},
            400,
            "messages",
            "maximum context length",
        ),
    ],
)
async def test_bad_requests_get_openai_errors(
    sdk: openai.AsyncOpenAI, kwargs: dict, status: int, param: str, fragment: str
) -> None:
    body = {"model": MODEL, "messages": chat("hi"), "max_tokens": 4} | kwargs
    with pytest.raises(openai.APIStatusError) as err:
        await sdk.chat.completions.create(**body)
    assert err.value.status_code == status
    assert err.value.body["param"] == param
    assert fragment in err.value.body["message"]
    assert err.value.body["type"] == "invalid_request_error"


async def test_malformed_and_oversized_bodies(live: LiveGateway) -> None:
    async with httpx.AsyncClient(base_url=live.url) as http:
        broken = await http.post(
            "/v1/chat/completions", content=b"{not json", headers={"content-type": "application/json"}
        )
        huge = await http.post(
            "/v1/chat/completions", content=b"x" * 300_000, headers={"content-type": "application/json"}
        )

    async def chunks() -> AsyncIterator[bytes]:
        for _ in range(40):
            yield b"x" * 10_000

    async with httpx.AsyncClient(base_url=live.url) as http:
        chunked = await http.post(
            "/v1/chat/completions", content=chunks(), headers={"content-type": "application/json"}
        )
        valid = json.dumps({"model": MODEL, "messages": chat("hi"), "max_tokens": 2}).encode()

        async def valid_chunks() -> AsyncIterator[bytes]:
            yield valid[:10]
            yield valid[10:]

        small_chunked = await http.post(
            "/v1/chat/completions", content=valid_chunks(), headers={"content-type": "application/json"}
        )
    assert broken.status_code == 400
    assert broken.json()["error"]["type"] == "invalid_request_error"
    assert huge.status_code == 413
    assert chunked.status_code == 413  # no Content-Length: counted as it arrives
    assert chunked.json()["error"]["code"] == "body_too_large"
    assert small_chunked.status_code == 200  # a chunked body under the limit is replayed intact


async def test_busy_and_missing_workers_get_retry_after(live: LiveGateway) -> None:
    for worker in live.workers:
        worker.mode = Mode.BUSY
    async with httpx.AsyncClient(base_url=live.url) as http:
        body = {"model": MODEL, "messages": chat("hi"), "max_tokens": 2}
        busy = await http.post("/v1/chat/completions", json=body)
        for worker in live.workers:
            await worker.stop()
        await live.index.purge(live.workers[0].worker_id)
        await live.index.purge(live.workers[1].worker_id)
        await live.gateway.directory.refresh()
        gone = await http.post("/v1/chat/completions", json=body)
        health = await http.get("/health")
    assert busy.status_code == 429
    assert int(busy.headers["retry-after"]) >= 1
    assert gone.status_code == 503
    assert "retry-after" in gone.headers
    assert health.status_code == 503


async def test_a_client_disconnect_mid_stream_aborts_the_worker(live: LiveGateway) -> None:
    for worker in live.workers:
        worker.token_delay_s = 0.05
    body = {"model": MODEL, "messages": chat("Tell a long story."), "max_tokens": 200, "stream": True}
    async with (
        httpx.AsyncClient(base_url=live.url) as http,
        http.stream("POST", "/v1/chat/completions", json=body) as response,
    ):
        assert response.status_code == 200
        lines = response.aiter_lines()
        while not (await anext(lines)).startswith("data: {"):
            pass
    for _ in range(100):
        if any(w.cancelled for w in live.workers):
            break
        await asyncio.sleep(0.02)
    assert sum(len(w.cancelled) for w in live.workers) == 1
    assert not any(w.served for w in live.workers)


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v1/messages"])
async def test_a_client_that_leaves_a_non_streaming_request_cancels_it_on_the_worker(
    live: LiveGateway, path: str
) -> None:
    """The client gives up (its read timeout closes the connection) long before the answer: the
    worker's call is cancelled within 2 s instead of running to max_tokens."""
    for worker in live.workers:
        worker.token_delay_s = 0.05  # 200 tokens: 10 s
    body = {"model": MODEL, "messages": [{"role": "user", "content": "A long story."}], "max_tokens": 200}
    async with httpx.AsyncClient(base_url=live.url, timeout=httpx.Timeout(30, read=0.5)) as http:
        with pytest.raises(httpx.ReadTimeout):
            await http.post(path, json=body)
    for _ in range(100):  # 2 s
        if any(w.cancelled for w in live.workers):
            break
        await asyncio.sleep(0.02)
    assert sum(len(w.cancelled) for w in live.workers) == 1
    assert not any(w.served for w in live.workers)


async def test_health_is_ok_with_workers(live: LiveGateway) -> None:
    async with httpx.AsyncClient(base_url=live.url) as http:
        reply = await http.get("/health")
    assert reply.status_code == 200
    assert reply.json() == {
        "status": "ok",
        "workers": 2,
        "index_degraded": False,
        "discovery_stale": False,
        "refused_workers": 0,
        "unfollowed_workers": 0,
        "shared_index_reachable": None,
    }


async def test_a_cache_control_mark_on_a_text_part_pins_its_prefix(
    sdk: openai.AsyncOpenAI, live: LiveGateway, tokenizer: Tokenizer
) -> None:
    marked = {"type": "text", "text": LONG_SYSTEM, "cache_control": {"type": "ephemeral", "ttl": "1h"}}
    messages = [{"role": "system", "content": [marked]}, {"role": "user", "content": "What is a chunk?"}]
    await sdk.chat.completions.create(model=MODEL, messages=messages, max_tokens=2)  # type: ignore[arg-type]
    system = [{"role": "system", "content": LONG_SYSTEM}]
    pinned = len(tokenizer.encode(tokenizer.apply_chat_template(system, add_generation_prompt=False),
                                  add_special_tokens=False))  # fmt: skip
    hints = [h for w in live.workers for h in w.hints]
    assert [(h.pinned_prefix_tokens, h.ttl_s) for h in hints] == [(pinned, 3600)]
    marked["cache_control"] = {"type": "ephemeral", "ttl": "2h"}
    with pytest.raises(openai.BadRequestError, match="unknown cache TTL class '2h'"):
        await sdk.chat.completions.create(model=MODEL, messages=messages, max_tokens=2)  # type: ignore[arg-type]


async def test_every_sampling_field_reaches_the_worker(sdk: openai.AsyncOpenAI, live: LiveGateway) -> None:
    """Chat and completions carry each sampling field, standard and extension, to the worker's
    request as the engine reads it (the engine's own handling is tested against a reference)."""
    fields = {
        "temperature": 0.7, "top_p": 0.9, "seed": 11, "max_tokens": 3, "stop": ["zz"],
        "presence_penalty": 0.5, "frequency_penalty": -0.25, "logit_bias": {"17": 5.0, "3": -100},
    }  # fmt: skip
    extra = {"top_k": 7, "min_p": 0.05, "repetition_penalty": 1.2, "min_tokens": 2, "stop_token_ids": [9, 4]}
    expected = {
        "temperature": 0.7, "top_p": 0.9, "seed": 11, "max_tokens": 3, "stop": ("zz",),
        "presence_penalty": 0.5, "frequency_penalty": -0.25, "logit_bias": ((3, -100.0), (17, 5.0)),
        "top_k": 7, "min_p": 0.05, "repetition_penalty": 1.2, "min_tokens": 2, "stop_token_ids": (9, 4),
    }  # fmt: skip
    await sdk.chat.completions.create(model=MODEL, messages=chat("Hi"), extra_body=extra, **fields)
    await sdk.completions.create(model=MODEL, prompt="Hi there", extra_body=extra, **fields)
    seen = [s for worker in live.workers for s in worker.sampling]
    assert len(seen) == 2
    for sampling in seen:  # floats travel as float32
        got = {name: getattr(sampling, name) for name in expected}
        assert got == {
            k: pytest.approx(v, rel=1e-6) if isinstance(v, float) else v for k, v in expected.items()
        }
