"""Prompts to token ids: the gateway's one place that renders a chat template or encodes text.

Tokenization runs in a worker thread (``asyncio.to_thread``) that releases the GIL while it
tokenizes, never on the event loop. Rendered chats are encoded by a ``SegmentedEncoder``: the pieces
between special tokens (a system prompt, earlier turns) seen before are not tokenized again. Besides the
prompt itself it measures two prefixes in tokens: the leading system messages (what a shared cache
namespace may cover) and the conversation up to each cache breakpoint (what a TTL class pins).
"""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

import numpy as np

from kvgate.common.tokenizer import ChatTemplateError, SegmentedEncoder, Tokenizer
from kvgate.gateway.core.request import (
    MAX_BREAKPOINTS,
    Breakpoint,
    ChatInput,
    ChatMessages,
    PromptInput,
    TextInput,
)
from kvgate.gateway.errors import invalid
from kvgate.proto.layout import TTL_CLASSES
from kvgate.proto.sampling import CacheHint

# A normalizer may shrink text before it is cut into tokens (composing characters): keep a margin.
_NORMALIZATION_MARGIN = 2


class PromptEncoder:
    """Owned by the composition root; safe to share across requests. Its only state is the cache of
    ``chats`` (the encoder of rendered chats, over the same tokenizer)."""

    def __init__(
        self, tokenizer: Tokenizer, chats: SegmentedEncoder, max_messages: int, context_window: int
    ) -> None:
        self._tokenizer = tokenizer
        self._chats = chats
        self._max_messages = max_messages
        self._window = context_window
        self._max_chars = context_window * tokenizer.max_token_chars * _NORMALIZATION_MARGIN

    async def encode(self, prompt: PromptInput) -> np.ndarray:
        """The token ids of ``prompt`` (uint32). INVALID_REQUEST for too many messages, messages the
        chat template refuses, token ids outside the vocabulary, or a text so long that it cannot fit
        the context window whatever its tokens (refused before it is tokenized: the cost of
        tokenizing grows with the text, the answer would be the same)."""
        self._check_length(prompt)
        if isinstance(prompt, ChatInput):
            return await asyncio.to_thread(self._render_and_encode, prompt.messages, prompt.generation_prompt,
                                           prompt.continue_final, dict(prompt.template_vars))  # fmt: skip
        if isinstance(prompt, TextInput):
            special = prompt.special_tokens
            return await asyncio.to_thread(self._tokenizer.encode, prompt.text, add_special_tokens=special)
        return self._checked_ids(prompt.token_ids)

    def _check_length(self, prompt: PromptInput) -> None:
        if isinstance(prompt, ChatInput):
            chars, param = sum(len(m["content"]) for m in prompt.messages), "messages"
        elif isinstance(prompt, TextInput):
            chars, param = len(prompt.text), "prompt"
        else:
            return  # token ids are counted exactly, as cheaply
        if chars > self._max_chars:
            message = (f"The prompt has {chars} characters: more than this model's maximum context length "
                       f"of {self._window} tokens can hold.")  # fmt: skip
            raise invalid(message, param, "context_length_exceeded")

    async def system_prefix(self, messages: ChatMessages, ids: np.ndarray) -> int:
        """Tokens of ``messages``' leading system messages within ``ids`` (their rendering): 0 when
        there is no system message or the template does not render it as a prefix of the whole."""
        system = list(itertools.takewhile(lambda m: m["role"] == "system", messages))
        if not system:
            return 0
        prefix = await self._chat(system, generation_prompt=False)
        n = len(prefix)
        return n if n <= len(ids) and np.array_equal(ids[:n], prefix) else 0

    async def breakpoint_hint(self, ids: np.ndarray, breakpoints: tuple[Breakpoint, ...]) -> CacheHint | None:
        """Pin up to the last breakpoint, for the longest TTL asked (None without breakpoints).
        INVALID_REQUEST for more than ``MAX_BREAKPOINTS`` or a TTL class the cache layout lacks."""
        if not breakpoints:
            return None
        if len(breakpoints) > MAX_BREAKPOINTS:
            raise invalid(f"at most {MAX_BREAKPOINTS} cache breakpoints are allowed", "cache_control")
        unknown = sorted({b.ttl_class for b in breakpoints} - set(TTL_CLASSES))
        if unknown:
            classes = ", ".join(repr(c) for c in TTL_CLASSES)
            raise invalid(f"unknown cache TTL class {unknown[0]!r}: use one of {classes}", "cache_ttl")
        marks = await asyncio.gather(*(self._chat(b.messages, generation_prompt=False) for b in breakpoints))
        pinned = _common_prefix(ids, marks[-1])
        ttl_s = max(TTL_CLASSES[b.ttl_class] for b in breakpoints)  # the longest class asked for
        return CacheHint(pinned_prefix_tokens=pinned, ttl_s=ttl_s)

    async def _chat(self, messages: ChatMessages, generation_prompt: bool = True) -> np.ndarray:
        return await asyncio.to_thread(self._render_and_encode, messages, generation_prompt)

    def _render_and_encode(
        self, messages: ChatMessages, generation_prompt: bool, continue_final: bool = False,
        template_vars: dict[str, Any] | None = None,
    ) -> np.ndarray:  # fmt: skip
        if len(messages) > self._max_messages:
            raise invalid(f"at most {self._max_messages} messages are allowed", "messages")
        try:
            text = self._tokenizer.apply_chat_template(
                messages, add_generation_prompt=generation_prompt, **(template_vars or {})
            )
        except (ChatTemplateError, ValueError) as exc:
            raise invalid(f"the chat template rejected the messages: {exc}", "messages") from exc
        return self._chats.encode(_left_open(text, messages[-1]["content"]) if continue_final else text)

    def _checked_ids(self, token_ids: object) -> np.ndarray:
        ids = np.asarray(token_ids, dtype=np.int64)
        vocab = self._tokenizer.vocab_size
        if ids.size and (ids.min() < 0 or ids.max() >= vocab):
            raise invalid(f"prompt token ids must lie in [0, {vocab})", "prompt")
        return ids.astype(np.uint32)


def _left_open(text: str, final: str) -> str:
    """``text`` cut just after the last message's content (its end-of-turn dropped), as vLLM continues
    a final message; INVALID_REQUEST when the template does not write that content as it is."""
    content = final.strip()
    at = text.rfind(content) if content else -1
    if at < 0:
        raise invalid("the final message cannot be continued: the chat template does not write its content "
                      "as given", "continue_final_message")  # fmt: skip
    return text[: at + len(content)]


def _common_prefix(a: np.ndarray, b: np.ndarray) -> int:
    n = min(len(a), len(b))
    differ = np.flatnonzero(a[:n] != b[:n])
    return int(differ[0]) if differ.size else n
