"""A family's call marker that is a special token (Llama 3.1's ``<|python_tag|>``) reaches the call
scanner: shown in the decoded text of a request that reads calls, while every other special token
stays hidden, and hidden again when the request reads none. Checked with a tiny byte-level BPE
tokenizer that has the marker as a special token, down the decoder, the incremental detokenizer and,
end to end, the OpenAI and Anthropic fronts of a live gateway over scripted workers."""

from __future__ import annotations

import json
from typing import Any

import httpx
import tokenizers
from tokenizers import decoders, models, pre_tokenizers, trainers

from kvgate.common.tokenizer import IncrementalDetokenizer, Tokenizer
from kvgate.common.tokenizer.tokenizer import SpecialTokens
from kvgate.gateway.core.call_formats import HERMES, LLAMA_JSON, MISTRAL, marker_ids, served_formats
from tests.support.live_gateway import MODEL, running_gateway

CALL = '{"name": "weather", "parameters": {"city": "Oslo"}}'
TEMPLATE = (
    "{% for m in messages %}<|start|>{{ m.role }}\n{{ m.content }}<|eot_id|>{% endfor %}"
    "{% if add_generation_prompt %}<|start|>assistant\n{% endif %}"
)


def tiny_tokenizer(
    specials: tuple[str, ...] = ("<|eot_id|>", "<|python_tag|>", "<|start|>"), plain: tuple[str, ...] = ()
) -> Tokenizer:
    """A byte-level BPE trained on a few lines, ``specials`` added as special tokens (ids 0, 1, ...),
    ``plain`` as added tokens that are not special."""
    backend = tokenizers.Tokenizer(models.BPE())
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=400, special_tokens=list(specials), show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )  # fmt: skip
    backend.train_from_iterator([CALL, "Hello there, what is the weather in Oslo today?"], trainer)
    backend.add_tokens(list(plain))
    return Tokenizer(backend, SpecialTokens(None, (0,)), TEMPLATE)


def ids(tokenizer: Tokenizer, text: str) -> list[int]:
    return tokenizer.encode(text, add_special_tokens=False).tolist()


def test_a_kept_marker_is_shown_and_other_special_tokens_stay_hidden() -> None:
    tokenizer = tiny_tokenizer()
    answer = ids(tokenizer, f"Hi<|python_tag|>{CALL}<|eot_id|>")
    tag = tokenizer.backend.token_to_id("<|python_tag|>")
    assert tokenizer.decode(answer, skip_special_tokens=True) == f"Hi{CALL}"
    assert tokenizer.decode(answer, skip_special_tokens=True, keep={tag}) == f"Hi<|python_tag|>{CALL}"


def test_the_detokenizer_keeps_the_marker_token_by_token() -> None:
    tokenizer = tiny_tokenizer()
    tag = tokenizer.backend.token_to_id("<|python_tag|>")
    prompt, answer = ids(tokenizer, "<|start|>assistant\n"), ids(tokenizer, f"<|python_tag|>{CALL}<|eot_id|>")
    kept = IncrementalDetokenizer(tokenizer, prompt, skip_special_tokens=True, keep={tag})
    hidden = IncrementalDetokenizer(tokenizer, prompt, skip_special_tokens=True)
    assert "".join(kept.push([i]) for i in answer) + kept.flush() == f"<|python_tag|>{CALL}"
    assert "".join(hidden.push([i]) for i in answer) + hidden.flush() == CALL


def test_formats_and_kept_markers_follow_the_served_tokenizer() -> None:
    llama = tiny_tokenizer()
    assert served_formats(llama) == (HERMES, LLAMA_JSON)
    assert marker_ids(llama, served_formats(llama)) == {llama.backend.token_to_id("<|python_tag|>")}
    mistral = tiny_tokenizer(("<|eot_id|>", "[TOOL_CALLS]", "<|start|>"))
    assert served_formats(mistral) == (HERMES, MISTRAL)
    plain = tiny_tokenizer(("<|eot_id|>", "<|start|>"))
    assert served_formats(plain) == (HERMES,)
    shown = tiny_tokenizer(("<|eot_id|>",), plain=("<|python_tag|>",))  # never hidden: nothing to keep
    assert served_formats(shown) == (HERMES, LLAMA_JSON)
    assert marker_ids(shown, served_formats(shown)) == frozenset()
    qwen = tiny_tokenizer(("<|eot_id|>", "<tool_call>", "</tool_call>"))  # a GGUF may make them control
    assert served_formats(qwen) == (HERMES,)
    assert marker_ids(qwen, (HERMES,)) == {
        qwen.backend.token_to_id(t) for t in ("<tool_call>", "</tool_call>")
    }
    assert marker_ids(plain, (HERMES,)) == frozenset()


TOOLS: list[Any] = [{"type": "function", "function": {"name": "weather", "parameters": {"type": "object"}}}]
ASK = [{"role": "user", "content": "What is the weather in Oslo?"}]


def sse(text: str) -> list[dict]:
    return [json.loads(line[6:]) for line in text.splitlines() if line.startswith("data: {")]


async def test_a_tagged_call_is_read_through_the_http_fronts_and_the_tag_never_shown() -> None:
    tokenizer = tiny_tokenizer()
    async with running_gateway(tokenizer) as live:
        for worker in live.workers:
            worker.reply = tuple(ids(tokenizer, f"Checking.<|python_tag|>{CALL}<|eot_id|>"))
        async with httpx.AsyncClient(base_url=live.url, timeout=30) as http:
            body = {"model": MODEL, "messages": ASK, "tools": TOOLS, "max_tokens": 100}
            plain = (await http.post("/v1/chat/completions", json=body)).json()["choices"][0]
            streamed = sse((await http.post("/v1/chat/completions", json=body | {"stream": True})).text)
            untooled = (await http.post("/v1/chat/completions", json=body | {"tools": None})).json()
            claude = {"model": MODEL, "messages": ASK, "max_tokens": 100,
                      "tools": [{"name": "weather", "input_schema": {"type": "object"}}]}  # fmt: skip
            anthropic = (await http.post("/v1/messages", json=claude)).json()
            tools = [{"type": "function", "name": "weather", "parameters": {"type": "object"}}]
            responses = {
                "model": MODEL,
                "input": "Weather in Oslo?",
                "tools": tools,
                "max_output_tokens": 100,
            }
            response = (await http.post("/v1/responses", json=responses)).json()
    assert plain["finish_reason"] == "tool_calls"
    assert plain["message"]["content"] == "Checking."
    assert [c["function"] for c in plain["message"]["tool_calls"]] == [
        {"name": "weather", "arguments": '{"city": "Oslo"}'}
    ]
    deltas = [c["choices"][0]["delta"] for c in streamed if c["choices"]]
    assert "".join(d.get("content") or "" for d in deltas) == "Checking."
    calls = [d["tool_calls"][0]["function"] for d in deltas if "tool_calls" in d]
    assert calls[0]["name"] == "weather"
    assert "".join(c["arguments"] for c in calls) == '{"city": "Oslo"}'
    assert untooled["choices"][0]["message"]["content"] == f"Checking.{CALL}"  # no tools: tag hidden
    assert [b["type"] for b in anthropic["content"]] == ["text", "tool_use"]
    assert anthropic["content"][0]["text"] == "Checking."
    assert anthropic["content"][1]["input"] == {"city": "Oslo"}
    assert [i["type"] for i in response["output"]] == ["message", "function_call"]
    assert response["output"][1]["arguments"] == '{"city": "Oslo"}'
