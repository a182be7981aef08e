"""Bad input against the real gateway over HTTP, two scripted gRPC workers behind it.

Every case is refused with a 4xx in the endpoint's error format (OpenAI's everywhere, Anthropic's on
/v1/messages), the refused request never reaches a worker, and the gateway serves the next request.
Limits here: 256 KiB bodies, a 4096-token context, 512 output tokens, 2048 messages, 8 stop strings of
at most 256 characters (``tests/support/live_gateway.py``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import httpx
import pytest

from tests.support.live_gateway import MODEL, LiveGateway
from tests.support.scripted_worker import Mode

CHAT, COMPLETIONS, MESSAGES, ROUTE = "/v1/chat/completions", "/v1/completions", "/v1/messages", "/v1/route"
HI = [{"role": "user", "content": "hi"}]
GOOD_CHAT = {"model": MODEL, "messages": HI, "max_tokens": 2}
GOOD_MESSAGE = {"model": MODEL, "messages": HI, "max_tokens": 2}


@dataclass(frozen=True)
class Bad:
    """One bad request and what the gateway must answer."""

    path: str
    body: bytes | dict | list | None
    status: int
    fragment: str  # part of the error message
    param: str | None = None  # OpenAI's ``param`` (not checked when None)
    code: str | None = None  # OpenAI's ``code`` (not checked when None)
    headers: dict[str, str] = field(default_factory=lambda: {"content-type": "application/json"})

    def content(self) -> bytes:
        return self.body if isinstance(self.body, bytes) else json.dumps(self.body).encode()


def chat(**changes: object) -> bytes:
    return json.dumps(GOOD_CHAT | changes).encode()


def raw_chat(fragment: str) -> bytes:
    """A chat body with ``fragment`` spliced in as raw JSON text (NaN, 1e400, ...)."""
    return chat()[:-1] + b", " + fragment.encode() + b"}"


def nested(depth: int) -> bytes:
    return b'{"model": "' + MODEL.encode() + b'", "messages": ' + b"[" * depth + b"]" * depth + b"}"


def message(**changes: object) -> dict:
    return GOOD_MESSAGE | changes


def breakpoints(n: int) -> list[dict]:
    block = {"type": "text", "text": "x", "cache_control": {"type": "ephemeral"}}
    return [{"role": "user", "content": [block] * n}]


CASES = {
    # size and limits
    "body-too-large": Bad(CHAT, chat(messages=[{"role": "user", "content": "x" * 300_000}]), 413,
                          "larger than", code="body_too_large"),
    "context-window": Bad(CHAT, chat(messages=[{"role": "user", "content": "word " * 5000}]), 400,
                          "maximum context length", "messages", "context_length_exceeded"),
    "context-window-ids": Bad(COMPLETIONS, {"model": MODEL, "prompt": list(range(5000))}, 400,
                              "maximum context length", code="context_length_exceeded"),
    "array-too-long": Bad(COMPLETIONS, {"model": MODEL, "prompt": [0] * 20_000}, 400,
                          "at most 16384 items, got 20000", "prompt"),  # refused before validation
    "max-tokens-too-big": Bad(CHAT, chat(max_tokens=100_000), 400, "at most 512 fit", "max_tokens"),
    "max-tokens-negative": Bad(CHAT, chat(max_tokens=-1), 400, "a value >= 1, but got", "max_tokens"),
    "max-tokens-zero": Bad(CHAT, chat(max_tokens=0), 400, "a value >= 1, but got", "max_tokens"),
    "max-tokens-10e30": Bad(CHAT, chat(max_tokens=10**30), 400, "a value <= 4294967295", "max_tokens"),
    "max-completion-tokens-huge": Bad(CHAT, chat(max_tokens=None, max_completion_tokens=2**40), 400,
                                      "expected a value <=", "max_completion_tokens"),
    "too-many-stops": Bad(CHAT, chat(stop=["a"] * 9), 400, "at most 8 stop strings", "stop"),
    "stop-too-long": Bad(CHAT, chat(stop=["a" * 257]), 400, "1 to 256 characters", "stop"),
    "stop-empty": Bad(CHAT, chat(stop=""), 400, "1 to 256 characters", "stop"),
    "too-many-messages": Bad(CHAT, chat(messages=HI * 2049), 400, "at most 2048 messages", "messages"),
    # syntax
    "malformed-json": Bad(CHAT, b'{"model": ', 400, "not valid JSON", code="invalid_json"),
    "trailing-garbage": Bad(CHAT, chat() + b"}", 400, "not valid JSON", code="invalid_json"),
    "invalid-utf8": Bad(CHAT, b'{"model": "\xff\xfe", "messages": []}', 400, "not valid UTF-8",
                        code="invalid_json"),
    "lone-surrogate": Bad(CHAT, chat()[:-1] + b', "user": "\\ud800"}', 400, "valid Unicode", "user"),
    "lone-surrogate-content": Bad(CHAT, b'{"model": "smollm2", "messages": [{"role": "user", "content": '
                                  b'"\\udfff"}]}', 400, "valid Unicode", "messages.0.content"),
    "lone-surrogate-model": Bad(CHAT, b'{"model": "\\ud83d"}', 400, "unicode string", "model"),
    "deeply-nested": Bad(CHAT, nested(100_000), 400, "nested too deeply", code="invalid_json"),
    "nested-in-a-field": Bad(CHAT, nested(500), 400, "messages.0", "messages.0"),
    "integer-of-5000-digits": Bad(CHAT, raw_chat('"seed": ' + "9" * 5000), 400, "not valid JSON",
                                  code="invalid_json"),
    "empty-body": Bad(CHAT, b"", 400, "body is missing"),
    "json-array": Bad(CHAT, [GOOD_CHAT], 400, "must be a JSON object"),
    "json-null": Bad(CHAT, b"null", 400, "must be a JSON object"),
    "json-string": Bad(CHAT, b'"hi"', 400, "must be a JSON object"),
    # types and values
    "max-tokens-string": Bad(CHAT, chat(max_tokens="2"), 400, "expected an integer, but got", "max_tokens"),
    "max-tokens-fraction": Bad(CHAT, chat(max_tokens=2.5), 400, "expected an integer, but got", "max_tokens"),
    "stream-string": Bad(CHAT, chat(stream="yes"), 400, "expected a boolean, but got", "stream"),
    "stream-int": Bad(CHAT, chat(stream=1), 400, "expected a boolean, but got", "stream"),
    "temperature-string": Bad(CHAT, chat(temperature="0.5"), 400, "a number, but got a string",
                              "temperature"),
    "messages-string": Bad(CHAT, chat(messages="hi"), 400, "expected an array, but got a string", "messages"),
    "content-number": Bad(CHAT, chat(messages=[{"role": "user", "content": 7}]), 400, "got an integer",
                          "messages.0.content"),
    "unknown-role": Bad(CHAT, chat(messages=[{"role": "wizard", "content": "x"}]), 400, "Supported values:",
                        "messages.0.role"),
    "unknown-field": Bad(CHAT, chat(bogus=1), 400, "Unrecognized request argument supplied: bogus", "bogus"),
    "unknown-nested-field": Bad(CHAT, chat(messages=[{"role": "user", "content": "x", "mood": "ok"}]), 400,
                                "Unrecognized request argument supplied: messages.0.mood",
                                "messages.0.mood"),
    "temperature-nan": Bad(CHAT, raw_chat('"temperature": NaN'), 400, "finite number", "temperature"),
    "temperature-infinity": Bad(CHAT, raw_chat('"temperature": Infinity'), 400, "finite number",
                                "temperature"),
    "temperature-1e400": Bad(CHAT, raw_chat('"temperature": 1e400'), 400, "finite number", "temperature"),
    "temperature-negative": Bad(CHAT, chat(temperature=-0.5), 400, "expected a value >= 0, but got -0.5",
                                "temperature"),
    "top-p-nan": Bad(CHAT, raw_chat('"top_p": NaN'), 400, "finite number", "top_p"),
    "top-p-negative-infinity": Bad(CHAT, raw_chat('"top_p": -Infinity'), 400, "finite number", "top_p"),
    "top-p-zero": Bad(CHAT, chat(top_p=0), 400, "expected a value > 0", "top_p"),
    "top-k-negative": Bad(CHAT, chat(top_k=-2), 400, "expected a value >= 0", "top_k"),
    "seed-10e30": Bad(CHAT, chat(seed=10**30), 400, "expected a value <=", "seed"),
    "n-nine": Bad(CHAT, chat(n=9), 400, "`n` > 8 is not supported by this server", "n"),
    "unknown-model": Bad(CHAT, chat(model="gpt-5"), 404, "This server serves: `smollm2`", "model",
                          "model_not_found"),
    "empty-messages": Bad(CHAT, chat(messages=[]), 400, "expected at least 1 item,", "messages"),
    "prompt-empty": Bad(COMPLETIONS, {"model": MODEL, "prompt": ""}, 400, "at least 1", "prompt"),
    "prompt-id-10e30": Bad(COMPLETIONS, {"model": MODEL, "prompt": [10**30]}, 400, "expected a value <=",
                           "prompt.0"),
    "prompt-id-negative": Bad(COMPLETIONS, {"model": MODEL, "prompt": [5, -1]}, 400,
                              "expected a value >= 0", "prompt.1"),
    "prompt-id-past-vocab": Bad(COMPLETIONS, {"model": MODEL, "prompt": [2**31]}, 400, "must lie in [0, ",
                                "prompt"),
    # content types
    "text-plain": Bad(CHAT, chat(), 415, "Content-Type: application/json", code="unsupported_media_type",
                      headers={"content-type": "text/plain"}),
    "no-content-type": Bad(CHAT, chat(), 415, "Content-Type: application/json",
                           code="unsupported_media_type", headers={}),
    "form": Bad(CHAT, b"model=smollm2", 415, "Content-Type: application/json", code="unsupported_media_type",
                headers={"content-type": "application/x-www-form-urlencoded"}),
    # the dry run validates like the requests it explains
    "route-malformed": Bad(ROUTE, b"{", 400, "not valid JSON", code="invalid_json"),
    "route-unknown-field": Bad(ROUTE, chat(bogus=1), 400, "Unrecognized request argument", "bogus"),
    "route-nan": Bad(ROUTE, raw_chat('"top_p": NaN'), 400, "finite number", "top_p"),
    "route-unknown-model": Bad(ROUTE, chat(model="x"), 404, "does not exist", "model"),
    "route-too-large": Bad(ROUTE, b"{" + b" " * 300_000 + b"}", 413, "larger than", code="body_too_large"),
    # Anthropic's endpoint answers in Anthropic's format
    "messages-malformed": Bad(MESSAGES, b"{", 400, "not valid JSON"),
    "messages-too-large": Bad(MESSAGES, b"{" + b" " * 300_000 + b"}", 413, "larger than"),
    "messages-unknown-model": Bad(MESSAGES, message(model="claude"), 404, "does not exist"),
    "messages-max-tokens-huge": Bad(MESSAGES, message(max_tokens=10**30), 400, "expected a value <="),
    "messages-no-max-tokens": Bad(MESSAGES, {"model": MODEL, "messages": HI}, 400,
                                  "Missing required parameter: 'max_tokens'"),
    "messages-temperature-nan": Bad(MESSAGES, json.dumps(message(temperature=float("nan"))).encode(), 400,
                                    "finite number"),
    "messages-top-k-huge": Bad(MESSAGES, message(top_k=2**40), 400, "expected a value <="),
    "messages-too-many-stops": Bad(MESSAGES, message(stop_sequences=["a"] * 9), 400, "at most 8 stop"),
    "messages-too-many-breakpoints": Bad(MESSAGES, message(messages=breakpoints(5)), 400,
                                         "at most 4 blocks may have cache_control"),
    "messages-unknown-field": Bad(MESSAGES, message(bogus=1), 400,
                                  "Unrecognized request argument supplied: bogus"),
    "messages-lone-surrogate": Bad(MESSAGES, b'{"model": "smollm2", "max_tokens": 2, "system": "\\ud800", '
                                   b'"messages": [{"role": "user", "content": "x"}]}', 400, "valid Unicode"),
    "messages-context-window": Bad(MESSAGES, message(messages=[{"role": "user", "content": "word " * 5000}]),
                                   400, "maximum context length"),
    "messages-text-plain": Bad(MESSAGES, message(), 415, "Content-Type: application/json",
                               headers={"content-type": "text/plain"}),
}  # fmt: skip


def assert_openai_error(reply: httpx.Response, case: Bad) -> None:
    error = reply.json()["error"]
    assert set(reply.json()) == {"error"}
    assert set(error) == {"message", "type", "param", "code"}
    assert error["type"] == "invalid_request_error"
    assert case.fragment in error["message"]
    if case.param is not None:
        assert error["param"] == case.param
    if case.code is not None:
        assert error["code"] == case.code


def assert_anthropic_error(reply: httpx.Response, case: Bad) -> None:
    kind = {400: "invalid_request_error", 404: "not_found_error", 413: "request_too_large"}
    assert reply.json() == {
        "type": "error",
        "error": {
            "type": kind.get(case.status, "invalid_request_error"),
            "message": reply.json()["error"]["message"],
        },
    }
    assert case.fragment in reply.json()["error"]["message"]


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
async def test_bad_input_gets_a_4xx_in_the_endpoints_format_and_the_gateway_serves_on(
    live: LiveGateway, case: Bad
) -> None:
    async with httpx.AsyncClient(base_url=live.url, timeout=10) as http:
        reply = await http.post(case.path, content=case.content(), headers=case.headers)
        assert reply.status_code == case.status, reply.text
        if case.path == MESSAGES:
            assert_anthropic_error(reply, case)
        else:
            assert_openai_error(reply, case)
        assert not any(w.served or w.cancelled for w in live.workers)  # refused before any dispatch
        good = (MESSAGES, GOOD_MESSAGE) if case.path == MESSAGES else (CHAT, GOOD_CHAT)
        after = await http.post(good[0], json=good[1])
    assert after.status_code == 200


async def test_a_chunked_body_over_the_limit_is_refused_in_the_anthropic_format(live: LiveGateway) -> None:
    async def chunks():  # no Content-Length: the limit is counted as the body arrives
        for _ in range(40):
            yield b" " * 10_000

    async with httpx.AsyncClient(base_url=live.url, timeout=10) as http:
        reply = await http.post(MESSAGES, content=chunks(), headers={"content-type": "application/json"})
    assert reply.status_code == 413
    assert reply.json()["error"]["type"] == "request_too_large"


async def stream_lines(live: LiveGateway, path: str, body: dict) -> list[str]:
    for worker in live.workers:
        worker.mode = Mode.FAIL_AFTER_TWO
    async with (
        httpx.AsyncClient(base_url=live.url, timeout=10) as http,
        http.stream("POST", path, json=body | {"stream": True, "max_tokens": 8}) as response,
    ):
        assert response.status_code == 200  # the failure comes after the first tokens
        return [line async for line in response.aiter_lines() if line]


async def test_a_failure_mid_stream_ends_an_openai_stream_with_an_error_then_done(live: LiveGateway) -> None:
    lines = await stream_lines(live, CHAT, GOOD_CHAT)
    assert lines[-1] == "data: [DONE]"
    error = json.loads(lines[-2].removeprefix("data: "))
    assert set(error) == {"error"}
    assert set(error["error"]) == {"message", "type", "param", "code"}
    assert error["error"]["type"] == "server_error"
    assert "INTERNAL" in error["error"]["message"]
    assert "engine crashed" not in error["error"]["message"]  # the worker's own words stay in the log


async def test_a_failure_mid_stream_ends_an_anthropic_stream_with_an_error_event(live: LiveGateway) -> None:
    lines = await stream_lines(live, MESSAGES, GOOD_MESSAGE)
    assert lines[-2] == "event: error"
    error = json.loads(lines[-1].removeprefix("data: "))
    assert error == {"type": "error", "error": {"type": "api_error", "message": error["error"]["message"]}}
    assert "event: message_stop" not in lines
