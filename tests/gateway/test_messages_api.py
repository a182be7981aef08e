"""Anthropic-style ``/v1/messages``: cache_control breakpoints reach the worker as a pinned prefix
with its TTL class, and usage splits cache reads from cache writes."""

from __future__ import annotations

import httpx

from kvgate.common.tokenizer import Tokenizer
from tests.support.live_gateway import MODEL, LiveGateway

SYSTEM = "You answer questions about the kvgate handbook. " * 40  # ~400 tokens


def body(question: str, ttl: str = "1h", **extra: object) -> dict:
    system = [{"type": "text", "text": SYSTEM, "cache_control": {"type": "ephemeral", "ttl": ttl}}]
    return {
        "model": MODEL,
        "max_tokens": 4,
        "system": system,
        "messages": [{"role": "user", "content": question}],
    } | extra


def system_tokens(tokenizer: Tokenizer) -> int:
    """Tokens of the prompt up to the end of the system block (the breakpoint)."""
    text = tokenizer.apply_chat_template([{"role": "system", "content": SYSTEM}], add_generation_prompt=False)
    return len(tokenizer.encode(text, add_special_tokens=False))


def prompt_tokens(tokenizer: Tokenizer, question: str) -> int:
    messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": question}]
    return len(tokenizer.encode(tokenizer.apply_chat_template(messages), add_special_tokens=False))


async def test_cache_control_pins_the_prefix_and_usage_splits_reads_from_writes(
    live: LiveGateway, tokenizer: Tokenizer
) -> None:
    pinned = system_tokens(tokenizer)
    async with httpx.AsyncClient(base_url=live.url) as http:
        first = (await http.post("/v1/messages", json=body("What is a chunk?"))).json()
        second = (await http.post("/v1/messages", json=body("What is an epoch?"))).json()

    hints = [h for w in live.workers for h in w.hints]
    assert [(h.pinned_prefix_tokens, h.ttl_s) for h in hints] == [(pinned, 3600), (pinned, 3600)]
    assert first["type"] == "message"
    assert first["stop_reason"] == "max_tokens"
    assert first["usage"]["cache_read_input_tokens"] == 0
    assert first["usage"]["cache_creation_input_tokens"] == pinned
    read = (pinned // 128) * 128  # whole chunks of the shared system prompt
    assert second["usage"]["cache_read_input_tokens"] == read
    assert second["usage"]["cache_creation_input_tokens"] == pinned - read
    total = sum(
        second["usage"][k] for k in ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
    )
    assert total == first["usage"]["input_tokens"] + pinned + (
        total - pinned - first["usage"]["input_tokens"]
    )
    assert second["usage"]["output_tokens"] == 4


async def test_messages_stream_in_anthropic_event_order(live: LiveGateway) -> None:
    async with (
        httpx.AsyncClient(base_url=live.url) as http,
        http.stream("POST", "/v1/messages", json=body("Stream please.", ttl="5m", stream=True)) as response,
    ):
        kinds = [
            line.removeprefix("event: ") async for line in response.aiter_lines() if line.startswith("event:")
        ]
    assert kinds[:2] == ["message_start", "content_block_start"]
    assert kinds[-3:] == ["content_block_stop", "message_delta", "message_stop"]
    assert set(kinds[2:-3]) <= {"content_block_delta"}
    assert live.workers[0].hints + live.workers[1].hints
    assert all(h.ttl_s == 300 for w in live.workers for h in w.hints)


async def test_messages_errors_use_the_anthropic_format(live: LiveGateway) -> None:
    async with httpx.AsyncClient(base_url=live.url) as http:
        missing = await http.post(
            "/v1/messages", json={"model": MODEL, "messages": [{"role": "user", "content": "x"}]}
        )
        bad_ttl = await http.post("/v1/messages", json=body("x", ttl="2h"))
        unknown = await http.post("/v1/messages", json=body("x") | {"model": "claude"})
    assert missing.status_code == 400
    assert missing.json() == {
        "type": "error",
        "error": {"type": "invalid_request_error", "message": missing.json()["error"]["message"]},
    }
    assert "max_tokens" in missing.json()["error"]["message"]
    assert bad_ttl.status_code == 400
    assert unknown.status_code == 404
    assert unknown.json()["error"]["type"] == "not_found_error"
