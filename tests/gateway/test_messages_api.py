"""Anthropic-style ``/v1/messages``: cache_control breakpoints reach the worker as a pinned prefix
with its TTL class, and usage splits cache reads from cache writes."""

from __future__ import annotations

import httpx
import pytest

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


TOOL = {"name": "add", "input_schema": {"type": "object", "properties": {"a": {"type": "integer"}}}}
USE = {"type": "tool_use", "id": "t", "name": "add", "input": {}}
TOOL_REFUSALS = [
    ({"tools": [TOOL], "tool_choice": {"type": "tool", "name": "sub"}}, "not among `tools`"),
    ({"tool_choice": {"type": "any"}}, "no `tools` are declared"),
    ({"tools": [TOOL, TOOL]}, "twice"),
    ({"tools": [{"name": "f", "input_schema": {"type": "frog"}}], "tool_choice": {"type": "any"}}, "frog"),
    ({"messages": [{"role": "user", "content": [USE]}]}, "belong to assistant turns"),
]  # fmt: skip


@pytest.mark.parametrize(("change", "fragment"), TOOL_REFUSALS)
async def test_tools_it_cannot_use_are_refused_in_a_sentence(
    live: LiveGateway, change: dict, fragment: str
) -> None:
    async with httpx.AsyncClient(base_url=live.url) as http:
        reply = await http.post("/v1/messages", json=body("x") | change)
    assert reply.status_code == 400, reply.text
    assert reply.json()["error"]["type"] == "invalid_request_error"
    assert fragment in reply.json()["error"]["message"]
    assert not any(w.served for w in live.workers)


async def test_a_breakpoint_on_a_tool_pins_the_system_message_with_the_tools(
    live: LiveGateway, tokenizer: Tokenizer
) -> None:
    marked = [TOOL | {"cache_control": {"type": "ephemeral", "ttl": "1h"}}]
    async with httpx.AsyncClient(base_url=live.url) as http:
        plain = await http.post("/v1/messages", json=body("x") | {"system": SYSTEM, "tools": [TOOL]})
        pinned = await http.post("/v1/messages", json=body("x") | {"system": SYSTEM, "tools": marked})
    assert plain.status_code == pinned.status_code == 200
    hints = [h for w in live.workers for h in w.hints]
    assert len(hints) == 1  # only the marked request carries a breakpoint
    assert hints[0].ttl_s == 3600
    assert hints[0].pinned_prefix_tokens > system_tokens(tokenizer) + 40  # the system message, then tools
