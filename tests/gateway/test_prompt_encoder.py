"""The prompt encoder: chats are encoded piece by piece with the ids of pieces seen before reused (same
ids as the whole rendered text), and tokenizing never holds the event loop."""

from __future__ import annotations

import asyncio
import time

import pytest

from kvgate.common.tokenizer import SegmentCache, SegmentedEncoder, Tokenizer
from kvgate.gateway.core.prompts import PromptEncoder
from kvgate.gateway.core.request import ChatInput, TextInput
from kvgate.gateway.settings import GatewaySettings
from kvgate.proto.layout import CacheLayout

SYSTEM = "You answer questions about the kvgate manual, in two lines at most.\n" * 60


def _encoder(tokenizer: Tokenizer, window: int = 8192) -> PromptEncoder:
    return PromptEncoder(tokenizer, SegmentedEncoder(tokenizer, SegmentCache()), 64, window)


def _chat(user: str) -> ChatInput:
    return ChatInput([{"role": "system", "content": SYSTEM}, {"role": "user", "content": user}])


async def test_chats_reuse_the_ids_of_a_system_prompt_seen_before(tokenizer: Tokenizer) -> None:
    cache = SegmentCache()
    prompts = PromptEncoder(tokenizer, SegmentedEncoder(tokenizer, cache), 64, 8192)
    for question in ("What is a chunk?", "What is a worker?"):
        ids = await prompts.encode(_chat(question))
        text = tokenizer.apply_chat_template(_chat(question).messages)
        assert ids.tolist() == tokenizer.encode(text, add_special_tokens=False).tolist()
    assert cache.hits >= 5  # the second chat: the system prompt, its header tokens, the turn separators

    system_tokens = await prompts.system_prefix(_chat("x").messages, ids)  # from the cache too
    system_text = tokenizer.apply_chat_template(_chat("x").messages[:1], add_generation_prompt=False)
    assert system_tokens == len(tokenizer.encode(system_text, add_special_tokens=False)) > 0


@pytest.mark.parametrize("kind", ["text", "chat"])
async def test_the_event_loop_runs_while_a_long_prompt_is_tokenized(tokenizer: Tokenizer, kind: str) -> None:
    text = " ".join(f"request{i} routed to worker {i % 7}; " for i in range(12_000))
    started = time.perf_counter()
    tokenizer.encode(text)
    alone_s = time.perf_counter() - started
    prompt = TextInput(text) if kind == "text" else ChatInput([{"role": "user", "content": text}])
    encoding = asyncio.create_task(_encoder(tokenizer, window=1 << 22).encode(prompt))

    gaps, last = [], time.perf_counter()
    while not encoding.done():
        await asyncio.sleep(0.001)
        now = time.perf_counter()
        gaps.append(now - last)
        last = now
    await encoding
    # a tokenizer holding the GIL would stall the loop for the whole encode (alone_s, ~0.1-0.3 s)
    assert max(gaps) < alone_s / 3, (max(gaps), alone_s)


def test_the_cache_bound_is_a_validated_setting() -> None:
    layout = CacheLayout("m")
    assert GatewaySettings("m", layout).tokenizer_cache_bytes == 64 * 1024 * 1024
    assert GatewaySettings("m", layout, tokenizer_cache_bytes=0).tokenizer_cache_bytes == 0
    with pytest.raises(ValueError, match="tokenizer_cache_bytes"):
        GatewaySettings("m", layout, tokenizer_cache_bytes=-1)


async def test_a_text_is_encoded_with_or_without_the_models_own_special_tokens(
    tokenizer: Tokenizer, monkeypatch: pytest.MonkeyPatch
) -> None:
    asked: list[bool] = []
    encode = tokenizer.encode

    def recording(text: str, *, add_special_tokens: bool = True) -> object:
        asked.append(add_special_tokens)
        return encode(text, add_special_tokens=add_special_tokens)

    monkeypatch.setattr(tokenizer, "encode", recording)
    prompts = _encoder(tokenizer)
    await prompts.encode(TextInput("hi"))
    await prompts.encode(TextInput("hi", special_tokens=False))  # vLLM's `add_special_tokens: false`
    assert asked == [True, False]


async def test_a_chat_is_rendered_with_the_clients_template_variables(
    tokenizer: Tokenizer, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[dict[str, object]] = []
    render = tokenizer.apply_chat_template

    def recording(messages: list, *, add_generation_prompt: bool = True, **extra: object) -> str:
        seen.append({"add_generation_prompt": add_generation_prompt, **extra})
        return render(messages, add_generation_prompt=add_generation_prompt, **extra)

    monkeypatch.setattr(tokenizer, "apply_chat_template", recording)
    chat = _chat("Is it on?")
    await _encoder(tokenizer).encode(ChatInput(chat.messages, template_vars=(("enable_thinking", False),)))
    await _encoder(tokenizer).encode(ChatInput(chat.messages, generation_prompt=False))
    with_vars, without_header = seen
    assert with_vars == {"add_generation_prompt": True, "enable_thinking": False}
    assert without_header == {"add_generation_prompt": False}
