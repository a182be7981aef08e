"""The OpenAI bodies as clients really send them, against a real gateway (scripted workers): every
optional field may be null, standard fields kvgate does not act on are accepted, values it cannot
honour are refused in a sentence (never a validator's wording), and ``GET /v1/models/{id}``."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import openai
import pytest

from kvgate.gateway.http_api.openai_support import IGNORED
from tests.support.live_gateway import LIMITS, MODEL, LiveGateway

CHAT, COMPLETIONS = "/v1/chat/completions", "/v1/completions"
HI = [{"role": "user", "content": "hi"}]
F_TOOL = {"type": "function", "function": {"name": "f"}}
VALIDATOR_WORDING = ("Input should", "Extra inputs", "Field required", "Value error", "validation error")

NULL_CHAT = {
    "model": MODEL,
    "messages": [{"role": "user", "content": "hi", "name": None, "tool_calls": None, "refusal": None,
                  "function_call": None, "audio": None, "tool_call_id": None}],
    **dict.fromkeys(
        ["temperature", "top_p", "seed", "stop", "stream", "stream_options", "n", "presence_penalty",
         "frequency_penalty", "logit_bias", "user", "prompt_cache_key", "metadata", "store", "service_tier",
         "safety_identifier", "prompt_cache_retention", "top_k", "min_p", "repetition_penalty", "min_tokens",
         "stop_token_ids", "ignore_eos", "skip_special_tokens", "spaces_between_special_tokens",
         "include_stop_str_in_output", "cache_salt", "guided_json",
         "max_tokens", "max_completion_tokens", "logprobs",
         "top_logprobs", "response_format", "tools", "tool_choice", "parallel_tool_calls", "functions",
         "function_call", "modalities", "audio", "prediction", "reasoning_effort", "verbosity",
         "web_search_options", "echo", "add_generation_prompt", "continue_final_message",
         "guided_regex", "guided_choice", "guided_grammar", "structured_outputs", "prompt_logprobs",
         "return_tokens_as_token_ids", "add_special_tokens", "truncate_prompt_tokens", "allowed_token_ids",
         "bad_words", "priority", "request_id", "chat_template_kwargs", "some_future_field"]
    ),
}  # fmt: skip
NULL_COMPLETION = {
    "model": MODEL,
    "prompt": "Once upon a time",
    **dict.fromkeys(["max_tokens", "echo", "logprobs", "suffix", "best_of", "n", "stream", "stream_options",
                     "temperature", "top_p", "seed", "stop", "user", "logit_bias", "presence_penalty",
                     "frequency_penalty", "ignore_eos", "another_future_field"]),
}  # fmt: skip
NOT_ACTED_ON = {
    "user": "u-1",
    "metadata": {"team": "a"},
    "store": True,
    "service_tier": "auto",
    "safety_identifier": "s-1",
    "prompt_cache_retention": "in_memory",
    "parallel_tool_calls": False,
    "prediction": {"type": "content", "content": "hello"},
    "reasoning_effort": "low",
    "verbosity": "low",
    "stream_options": {"include_obfuscation": False, "continuous_usage_stats": True},
    "spaces_between_special_tokens": True,
    "tool_choice": "none",
    "response_format": {"type": "text"},
    "modalities": ["text"],
    "skip_special_tokens": True,
    "include_stop_str_in_output": False,
    "top_k": -1,  # vLLM's "off"
    "priority": 3,
    "request_id": "client-chosen-1",
    # on messages and their parts: an assistant's reasoning, Anthropic's cache marks
    "messages": [
        {"role": "user", "content": [{"type": "text", "text": "hi", "cache_control": {"type": "ephemeral"}}]},
        {"role": "assistant", "content": "hello", "reasoning_content": "greet back", "reasoning": "r"},
        {"role": "user", "content": "hi"},
    ],
    # vLLM's extensions at the values that are kvgate's defaults
    "add_special_tokens": False,
    "truncate_prompt_tokens": -1,
    "chat_template_kwargs": {"enable_thinking": False},  # a variable the model's template does not read
    "allowed_token_ids": [],
    "bad_words": [],
}  # fmt: skip


@pytest.fixture
async def http(live: LiveGateway) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=live.url, timeout=10) as client:
        yield client


async def test_every_optional_field_may_be_null(http: httpx.AsyncClient) -> None:
    chat = await http.post(CHAT, json=NULL_CHAT)
    completion = await http.post(COMPLETIONS, json=NULL_COMPLETION)
    assert chat.status_code == 200, chat.text
    assert completion.status_code == 200, completion.text
    assert completion.json()["usage"]["completion_tokens"] == 16  # null max_tokens: OpenAI's default


async def test_standard_fields_kvgate_does_not_act_on_are_accepted(http: httpx.AsyncClient) -> None:
    stated = {name.split(".")[0] for name in IGNORED}
    assert stated <= set(NOT_ACTED_ON)  # every field the docs list as ignored is tried here
    reply = await http.post(CHAT, json={"model": MODEL, "messages": HI, "max_tokens": 2} | NOT_ACTED_ON)
    assert reply.status_code == 200, reply.text


async def test_an_assistant_refusal_part_is_history_not_an_error(http: httpx.AsyncClient) -> None:
    messages = [*HI, {"role": "assistant", "content": [{"type": "refusal", "refusal": "No."}]}, *HI]
    reply = await http.post(CHAT, json={"model": MODEL, "messages": messages, "max_tokens": 2})
    assert reply.status_code == 200, reply.text


UNSUPPORTED = [
    (CHAT, {"n": 9}, "n", "`n` > 8 is not supported by this server"),
    (CHAT, {"top_logprobs": 2}, "top_logprobs", "needs `logprobs: true`"),
    (COMPLETIONS, {"max_tokens": 0}, "max_tokens", "`max_tokens: 0` needs `echo: true`"),
    (CHAT, {"tools": [F_TOOL, F_TOOL]}, "tools", "declares a function name twice"),
    (CHAT, {"tool_choice": "required"}, "tool_choice", "no `tools` are declared"),
    (CHAT, {"tools": [F_TOOL], "tool_choice": {"type": "function", "function": {"name": "g"}}}, "tool_choice",
     "names `g`, which is not among `tools`"),
    (CHAT, {"tools": [F_TOOL], "tool_choice": "required", "response_format": {"type": "json_object"}},
     "tool_choice", "cannot be combined"),
    (CHAT, {"tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "frog"}}}],
            "tool_choice": "required"}, "tools", "Invalid type: frog"),
    (CHAT, {"functions": [{"name": "f"}]}, "functions", "declare them as `tools`"),
    (CHAT, {"response_format": {"type": "json_schema", "json_schema": {"name": "n", "schema": {"not": {}}}}},
     "response_format", "cannot be used for constrained decoding: Unimplemented keys: [\"not\"]"),
    (CHAT, {"response_format": {"type": "json_schema"}}, "response_format", "needs a `json_schema` object"),
    (COMPLETIONS, {"guided_json": {"type": "integer", "minimum": 2, "maximum": 1}}, "guided_json",
     "Unsatisfiable schema"),
    (CHAT, {"guided_json": {"type": "object"}, "response_format": {"type": "json_object"}}, "guided_json",
     "not both"),
    (CHAT, {"modalities": ["text", "audio"]}, "modalities", "audio output is not supported"),
    (CHAT, {"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]},
     "messages.0.content.0", "`image_url` content is not supported by this server"),
    (CHAT, {"messages": [*HI, {"role": "function", "name": "f", "content": "1"}]}, "messages.1",
     "deprecated form of tool calls"),
    (CHAT, {"messages": [*HI, {"role": "assistant", "tool_calls": [
        {"id": "c", "type": "function", "function": {"name": "f", "arguments": "[1]"}}]}]},
     "messages.1.tool_calls", "must be a JSON object"),
    (CHAT, {"include_stop_str_in_output": True}, "include_stop_str_in_output", "stop strings are never"),
    (CHAT, {"bogus": {"a": 1}}, "bogus", "Unrecognized request argument supplied: bogus"),
    (COMPLETIONS, {"suffix": "end"}, "suffix", "`suffix` (insertion) is not supported"),
    (COMPLETIONS, {"best_of": 3}, "best_of", "`best_of` other than `n`"),
    (CHAT, {"guided_grammar": "root ::= \"a\""}, "guided_grammar", "`guided_grammar` is not supported"),
    (CHAT, {"structured_outputs": {"grammar": "root ::= x"}}, "structured_outputs",
     "`structured_outputs.grammar` is not supported"),
    (CHAT, {"structured_outputs": {"regex": "a", "choice": ["a"]}}, "structured_outputs", "exactly one of"),
    (CHAT, {"structured_outputs": {"json": {"type": "object"}, "disable_additional_properties": True}},
     "structured_outputs", "write `additionalProperties: false`"),
    (CHAT, {"structured_outputs": {"json": "{"}}, "structured_outputs", "not valid JSON"),
    (CHAT, {"guided_regex": "(", "guided_choice": ["a"]}, "guided_choice", "not both"),
    (COMPLETIONS, {"guided_regex": "(unclosed"}, "guided_regex", "unclosed group"),
    (CHAT, {"truncate_prompt_tokens": 0}, "truncate_prompt_tokens", "must be at least 1"),
    (COMPLETIONS, {"allowed_token_ids": [1, 2], "guided_choice": ["a"]}, "allowed_token_ids", "not both"),
    (COMPLETIONS, {"bad_words": ["x"]}, "bad_words", "is not supported by this server"),
    (CHAT, {"add_special_tokens": True}, "add_special_tokens", "the chat template writes"),
    (CHAT, {"chat_template_kwargs": {"enable_thinking": False, "tools": []}}, "chat_template_kwargs",
     "may not set `messages`, `add_generation_prompt`, `tools`"),
    (CHAT, {"prompt_logprobs": 1, "stream": True}, "prompt_logprobs", "in a stream is not supported"),
    (COMPLETIONS, {"prompt_logprobs": 1, "echo": True, "logprobs": 2}, "prompt_logprobs", "must equal"),
    (CHAT, {"echo": True, "stream": True}, "echo", "chat `echo` in a stream is not supported"),
    (CHAT, {"continue_final_message": True}, "continue_final_message", "needs an assistant message last"),
    (CHAT, {"messages": [*HI, {"role": "assistant", "content": "So"}], "continue_final_message": True,
            "add_generation_prompt": True}, "continue_final_message", "cannot be combined"),
]  # fmt: skip


@pytest.mark.parametrize(("path", "change", "param", "fragment"), UNSUPPORTED)
async def test_values_kvgate_cannot_honour_are_refused_in_a_sentence(
    http: httpx.AsyncClient, live: LiveGateway, path: str, change: dict, param: str, fragment: str
) -> None:
    base = {"model": MODEL, "max_tokens": 2} | ({"messages": HI} if path == CHAT else {"prompt": "x"})
    reply = await http.post(path, json=base | change)
    assert reply.status_code == 400, reply.text
    error = reply.json()["error"]
    assert error["type"] == "invalid_request_error"
    assert (error["param"], fragment in error["message"]) == (param, True), error
    assert not any(w.served for w in live.workers)


BAD_TYPES = [
    {"max_tokens": "2"}, {"stream": 1}, {"n": 0}, {"temperature": 3}, {"top_p": 0}, {"logit_bias": []},
    {"messages": [{"role": "wizard", "content": "x"}]}, {"messages": []}, {"model": ""},
    {"messages": [{"role": "user", "content": "x", "mood": 1}]}, {"stop": 5}, {"stop_token_ids": [-1]},
    {"presence_penalty": 9}, {"logit_bias": {"5": 200}}, {"top_logprobs": 21}, {"seed": "1"},
    {"response_format": {"type": "json_schema", "json_schema": {"name": "n", "schema": [1]}}},
    {"response_format": {"type": "yaml"}},
    {"tools": [{"type": "function", "function": {"name": "no spaces allowed"}}]},
    {"tool_choice": "sometimes"},
    {"messages": [{"role": "user", "content": [{"type": "text", "text": "x", "cache_control": 5}]}]},
    {"tool_choice": {"type": "function", "function": {"name": 5}}},
    {"structured_outputs": {"choice": []}},
    {"messages": [*HI, {"role": "assistant", "tool_calls": [{"id": "c"}]}]},
]  # fmt: skip


@pytest.mark.parametrize("change", BAD_TYPES)
async def test_no_refusal_reads_like_a_validator(http: httpx.AsyncClient, change: dict) -> None:
    reply = await http.post(CHAT, json={"model": MODEL, "messages": HI, "max_tokens": 2} | change)
    assert reply.status_code == 400, reply.text
    message = reply.json()["error"]["message"]
    assert not any(w in message for w in VALIDATOR_WORDING), message
    param = reply.json()["error"]["param"]
    assert param is not None
    assert not any(part[:1].isupper() for part in param.split(".")), param  # no pydantic class names


@pytest.mark.parametrize(("change", "param"), [
    ({"messages": [{"role": "user", "content": [{"type": "text", "text": "x", "cache_control": 5}]}]},
     "messages.0.content.0.cache_control"),
    ({"tool_choice": {"type": "function", "function": {"name": 5}}}, "tool_choice.function.name"),
])  # fmt: skip
async def test_a_refusal_names_the_field_as_the_client_wrote_it(
    http: httpx.AsyncClient, change: dict, param: str
) -> None:
    reply = await http.post(CHAT, json={"model": MODEL, "messages": HI, "max_tokens": 2} | change)
    assert (reply.status_code, reply.json()["error"]["param"]) == (400, param), reply.text


async def test_a_model_is_described_by_its_id(live: LiveGateway) -> None:
    async with openai.AsyncOpenAI(base_url=f"{live.url}/v1", api_key="x", max_retries=0) as sdk:
        model = await sdk.models.retrieve(MODEL)
        listed = await sdk.models.list()
        with pytest.raises(openai.NotFoundError) as missing:
            await sdk.models.retrieve("org/other-model")
    assert (model.id, model.model_extra["max_model_len"]) == (MODEL, LIMITS.context_window)
    assert listed.data[0].model_extra["max_model_len"] == LIMITS.context_window
    assert missing.value.body["code"] == "model_not_found"
    assert "`org/other-model` does not exist. This server serves: `smollm2`" in missing.value.body["message"]
