"""``GET /v1/responses/{id}/input_items`` through the official SDK against a real gateway (scripted
workers): a response's own input items in OpenAI's list shape, newest first unless ``order=asc``,
paged by ``limit`` and ``after`` (the SDK's auto-pagination walks them all), per tenant, and bad
parameters refused in a sentence."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import openai
import pytest

from kvgate.common.tokenizer import Tokenizer
from kvgate.gateway.tenancy import KeyRing, Tenant, hash_key
from tests.support.live_gateway import MODEL, LiveGateway, running_gateway

ITEMS: list[Any] = [
    {"role": "user", "content": "What is the weather in Oslo?", "id": "msg_given"},
    {"type": "function_call", "call_id": "call_1", "name": "weather", "arguments": '{"city": "Oslo"}'},
    {"type": "function_call_output", "call_id": "call_1", "output": "4 C, clear"},
    {"role": "assistant", "content": [{"type": "output_text", "text": "It is 4 C."}]},
    {"role": "user", "content": "And tomorrow?"},
]


@pytest.fixture
async def sdk(live: LiveGateway) -> AsyncIterator[openai.AsyncOpenAI]:
    async with openai.AsyncOpenAI(base_url=f"{live.url}/v1", api_key="unused", max_retries=0) as client:
        yield client


async def test_a_string_input_is_one_user_message(sdk: openai.AsyncOpenAI) -> None:
    reply = await sdk.responses.create(model=MODEL, instructions="Be brief.", input="Hi there",
                                       max_output_tokens=2)  # fmt: skip
    page = await sdk.responses.input_items.list(reply.id)
    [item] = page.data
    assert (item.type, item.role, item.status) == ("message", "user", "completed")  # type: ignore[union-attr]
    assert [(p.type, p.text) for p in item.content] == [("input_text", "Hi there")]  # type: ignore[union-attr]
    assert item.id.startswith("msg_")
    assert (page.first_id, page.last_id, page.has_more) == (item.id, item.id, False)


async def test_items_list_newest_first_and_page_by_limit_and_after(
    sdk: openai.AsyncOpenAI, live: LiveGateway
) -> None:
    reply = await sdk.responses.create(model=MODEL, input=ITEMS, max_output_tokens=2)
    oldest_first = (await sdk.responses.input_items.list(reply.id, order="asc")).data
    assert [i.type for i in oldest_first] == ["message", "function_call", "function_call_output", "message",
                                             "message"]  # fmt: skip
    assert oldest_first[0].id == "msg_given"
    assert (oldest_first[1].name, oldest_first[1].arguments) == ("weather", '{"city": "Oslo"}')  # type: ignore[union-attr]
    assert oldest_first[2].output == "4 C, clear"  # type: ignore[union-attr]
    ids = [i.id for i in oldest_first]
    newest = await sdk.responses.input_items.list(reply.id, limit=2)
    assert [i.id for i in newest.data] == ids[::-1][:2]
    assert (newest.first_id, newest.last_id, newest.has_more) == (ids[4], ids[3], True)
    rest = await sdk.responses.input_items.list(reply.id, limit=2, after=newest.last_id)
    assert [i.id for i in rest.data] == [ids[2], ids[1]]
    assert [i.id async for i in sdk.responses.input_items.list(reply.id, limit=2)] == ids[::-1]  # auto-pages
    async with httpx.AsyncClient(base_url=live.url) as http:
        for query, param in (({"limit": "0"}, "limit"), ({"limit": "x"}, "limit"), ({"order": "up"}, "order"),
                             ({"after": "msg_none"}, "after")):  # fmt: skip
            refused = await http.get(f"/v1/responses/{reply.id}/input_items", params=query)
            assert refused.status_code == 400
            error = refused.json()["error"]
            assert (error["type"], error["param"]) == ("invalid_request_error", param)
            assert f"`{param}`" in error["message"]


async def test_another_tenants_response_has_no_input_items(tokenizer: Tokenizer) -> None:
    keys = {"acme": "kvg-acme-key", "beta": "kvg-beta-key"}
    ring = KeyRing([(hash_key(key), Tenant(name)) for name, key in keys.items()])
    async with running_gateway(tokenizer, keys=ring) as live:
        acme, beta = (openai.AsyncOpenAI(base_url=f"{live.url}/v1", api_key=key, max_retries=0)
                      for key in keys.values())  # fmt: skip
        async with acme, beta:
            mine = await acme.responses.create(model=MODEL, input="Secret plans.", max_output_tokens=2)
            assert len((await acme.responses.input_items.list(mine.id)).data) == 1
            with pytest.raises(openai.NotFoundError) as refused:
                await beta.responses.input_items.list(mine.id)
            assert "Secret" not in str(refused.value.body)
            await acme.responses.delete(mine.id)
            with pytest.raises(openai.NotFoundError):
                await acme.responses.input_items.list(mine.id)
