"""Structured output end to end: the ``openai`` SDK against the real gateway over a real worker on the
tiny random model. Whatever the model would write, twenty schemas' outputs all validate (sampled and
greedy), ``json_object`` gives a JSON object, streaming and ``n`` choices hold to the schema, the
completions API and vLLM's ``guided_json`` are constrained too, the SDK's own ``parse`` helper reads
the answer, and a schema the grammar engine cannot compile is a 400 naming ``response_format`` that
never reaches the worker."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import jsonschema
import openai
import pydantic
import pytest

from kvgate.common.clock import SystemClock
from kvgate.common.tokenizer import Tokenizer, load_tokenizer
from kvgate.gateway.settings import Limits
from kvgate.index import IndexSettings, MemoryPrefixIndex
from kvgate.workers.service import WorkerServer
from tests.support.json_schemas import SCHEMAS
from tests.support.real_workers import StartWorker
from tests.workers.service.helpers import MAX_MODEL_LEN
from tests.workers.service.openai_front import openai_front

MODEL = "tiny"
LIMITS = Limits(context_window=MAX_MODEL_LEN, max_output_tokens=400, request_timeout_s=60)
MESSAGES = [{"role": "user", "content": "Describe it as JSON."}]


@dataclass
class Stack:
    client: openai.AsyncOpenAI
    tokenizer: Tokenizer
    worker: WorkerServer


@pytest.fixture
async def stack(start_worker: StartWorker, tiny_chat_model: Path) -> AsyncIterator[Stack]:
    index = MemoryPrefixIndex(IndexSettings(), SystemClock())
    worker = await start_worker(index)
    tokenizer = load_tokenizer(tiny_chat_model)
    async with openai_front(index, tokenizer, LIMITS, MODEL) as client:
        yield Stack(client, tokenizer, worker)


def schema_format(name: str, schema: dict[str, Any]) -> dict[str, Any]:
    return {"type": "json_schema", "json_schema": {"name": name, "schema": schema, "strict": True}}


async def test_twenty_schemas_always_yield_valid_output(stack: Stack) -> None:
    assert len(SCHEMAS) == 20

    async def ask(name: str, temperature: float) -> tuple[str, str, str | None]:
        reply = await stack.client.chat.completions.create(
            model=MODEL, messages=MESSAGES, max_tokens=300, temperature=temperature, seed=len(name),
            response_format=schema_format(name, SCHEMAS[name]),  # type: ignore[arg-type]
        )  # fmt: skip
        return name, reply.choices[0].finish_reason, reply.choices[0].message.content

    asked = [ask(name, t) for name in SCHEMAS for t in (0.0, 1.0)]
    for name, finish, content in await asyncio.gather(*asked):
        assert finish == "stop", (name, content)
        jsonschema.validate(json.loads(content or ""), SCHEMAS[name])


async def test_json_object_mode_yields_a_json_object(stack: Stack) -> None:
    quote, brace = (stack.tokenizer.encode(c, add_special_tokens=False)[0] for c in '"}')
    reply = await stack.client.chat.completions.create(
        model=MODEL, messages=MESSAGES, max_tokens=300, temperature=0,
        response_format={"type": "json_object"},
        logit_bias={str(quote): 6, str(brace): 6},  # the random model closes strings and objects soon
    )  # fmt: skip
    assert reply.choices[0].finish_reason == "stop"
    assert isinstance(json.loads(reply.choices[0].message.content or ""), dict)


async def test_a_streamed_answer_and_each_of_n_choices_validate(stack: Stack) -> None:
    schema = SCHEMAS["array_of_objects"]
    stream = await stack.client.chat.completions.create(
        model=MODEL, messages=MESSAGES, max_tokens=300, temperature=1.0, seed=4, stream=True,
        response_format=schema_format("items", schema),  # type: ignore[arg-type]
    )  # fmt: skip
    chunks = [chunk async for chunk in stream]
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    jsonschema.validate(json.loads(text), schema)
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"
    reply = await stack.client.chat.completions.create(
        model=MODEL, messages=MESSAGES, max_tokens=300, temperature=1.0, seed=5, n=3,
        response_format=schema_format("items", schema),  # type: ignore[arg-type]
    )  # fmt: skip
    assert len(reply.choices) == 3
    for choice in reply.choices:
        jsonschema.validate(json.loads(choice.message.content or ""), schema)


async def test_completions_and_guided_json_are_constrained_too(stack: Stack) -> None:
    schema = SCHEMAS["nested"]
    completion = await stack.client.completions.create(
        model=MODEL, prompt="A user:", max_tokens=200, temperature=1.0, seed=6,
        extra_body={"response_format": schema_format("user", schema)},
    )  # fmt: skip
    jsonschema.validate(json.loads(completion.choices[0].text), schema)
    guided = await stack.client.chat.completions.create(
        model=MODEL, messages=MESSAGES, max_tokens=200, temperature=1.0, seed=7,
        extra_body={"guided_json": schema},
    )  # fmt: skip
    jsonschema.validate(json.loads(guided.choices[0].message.content or ""), schema)


class Pet(pydantic.BaseModel):
    name: Annotated[str, pydantic.Field(max_length=6)]
    legs: Annotated[int, pydantic.Field(ge=0, le=8)]
    kind: Annotated[str, pydantic.Field(pattern="^(cat|dog|bird)$")]


async def test_the_sdks_parse_helper_reads_the_answer(stack: Stack) -> None:
    reply = await stack.client.chat.completions.parse(
        model=MODEL, messages=MESSAGES, max_tokens=200, temperature=1.0, seed=8, response_format=Pet  # type: ignore[arg-type]
    )  # fmt: skip
    pet = reply.choices[0].message.parsed
    assert isinstance(pet, Pet)
    assert pet.kind in ("cat", "dog", "bird")


@pytest.mark.parametrize("schema", [{"type": "object", "not": {"required": ["a"]}},
                                    {"type": "string", "pattern": "(?<=a)b"},
                                    {"type": "object", "properties": {"p": {"$ref": "#/$defs/missing"}}}],
                         ids=["unsupported-keyword", "look-behind", "dangling-ref"])  # fmt: skip
async def test_a_schema_that_cannot_compile_is_a_400_that_never_reaches_the_worker(
    stack: Stack, schema: dict[str, Any]
) -> None:
    before = stack.worker.engine.counters().requests
    with pytest.raises(openai.BadRequestError) as refused:
        await stack.client.chat.completions.create(
            model=MODEL, messages=MESSAGES, max_tokens=20, response_format=schema_format("bad", schema)  # type: ignore[arg-type]
        )  # fmt: skip
    assert refused.value.param == "response_format"
    assert "cannot be used for constrained decoding" in refused.value.message
    assert stack.worker.engine.counters().requests == before


async def test_vllms_regex_and_choice_constraints_hold(stack: Stack) -> None:
    regex = r"[a-c]{2}/\d{3}"
    choices = ["cat", "dog", 'say "hi"']

    async def ask(extra: dict[str, Any], seed: int) -> str:
        reply = await stack.client.chat.completions.create(
            model=MODEL, messages=MESSAGES, max_tokens=200, temperature=1.0, seed=seed, extra_body=extra
        )
        assert reply.choices[0].finish_reason == "stop", reply
        return reply.choices[0].message.content or ""

    asked = [ask({"guided_regex": regex}, 1), ask({"structured_outputs": {"regex": regex}}, 2),
             ask({"guided_choice": choices}, 3), ask({"structured_outputs": {"choice": choices}}, 4),
             ask({"structured_outputs": {"json": json.dumps(SCHEMAS["nested"])}}, 5)]  # fmt: skip
    by_regex_1, by_regex_2, chosen_1, chosen_2, as_json = await asyncio.gather(*asked)
    assert re.fullmatch(regex, by_regex_1), by_regex_1
    assert re.fullmatch(regex, by_regex_2), by_regex_2
    assert {chosen_1, chosen_2} <= set(choices)
    jsonschema.validate(json.loads(as_json), SCHEMAS["nested"])
    completion = await stack.client.completions.create(
        model=MODEL, prompt="Pick:", max_tokens=10, seed=6, extra_body={"guided_choice": ["yes", "no"]}
    )
    assert completion.choices[0].text in ("yes", "no")


async def test_allowed_token_ids_are_the_only_tokens_written(stack: Stack) -> None:
    allowed = [stack.tokenizer.encode(c, add_special_tokens=False).tolist()[0] for c in "ab"]
    reply = await stack.client.completions.create(
        model=MODEL, prompt="Pick:", max_tokens=12, temperature=1.0, seed=9, logprobs=0,
        extra_body={"allowed_token_ids": allowed, "return_tokens_as_token_ids": True},
    )  # fmt: skip
    tokens = [int(t.removeprefix("token_id:")) for t in reply.choices[0].logprobs.tokens]
    if reply.choices[0].finish_reason == "stop":  # EOS stays allowed (the tiny model's: its last special)
        tokens.pop()
    assert tokens
    assert set(tokens) <= set(allowed), tokens
    assert set(reply.choices[0].text) <= set("ab")
    with pytest.raises(openai.BadRequestError) as outside:
        await stack.client.completions.create(model=MODEL, prompt="Pick:", max_tokens=2,
                                              extra_body={"allowed_token_ids": [100_000]})  # fmt: skip
    assert outside.value.status_code == 400
