"""Prompts to token ids: the gateway's one place that renders a chat template or encodes text.

Tokenization runs in a worker thread (``asyncio.to_thread``), never on the event loop. Besides the
prompt itself it measures two prefixes in tokens: the leading system messages (what a shared cache
namespace may cover) and the conversation up to each cache breakpoint (what a TTL class pins).
"""

from __future__ import annotations

import asyncio
import itertools

import numpy as np

from kvgate.common.tokenizer import ChatTemplateError, Tokenizer
from kvgate.gateway.core.request import Breakpoint, ChatInput, ChatMessages, PromptInput, TextInput
from kvgate.gateway.errors import invalid
from kvgate.proto.layout import TTL_CLASSES
from kvgate.proto.sampling import CacheHint


class PromptEncoder:
    """Owned by the composition root; stateless, safe to share across requests."""

    def __init__(self, tokenizer: Tokenizer, max_messages: int) -> None:
        self._tokenizer = tokenizer
        self._max_messages = max_messages

    async def encode(self, prompt: PromptInput) -> np.ndarray:
        """The token ids of ``prompt`` (uint32). INVALID_REQUEST for too many messages, messages the
        chat template refuses, or token ids outside the vocabulary."""
        if isinstance(prompt, ChatInput):
            return await self._chat(prompt.messages)
        if isinstance(prompt, TextInput):
            return await asyncio.to_thread(self._tokenizer.encode, prompt.text)
        return self._checked_ids(prompt.token_ids)

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
        """Pin up to the last breakpoint, for the longest TTL asked (None without breakpoints)."""
        if not breakpoints:
            return None
        marks = await asyncio.gather(*(self._chat(b.messages, generation_prompt=False) for b in breakpoints))
        pinned = _common_prefix(ids, marks[-1])
        ttl_s = max(TTL_CLASSES[b.ttl_class] for b in breakpoints)  # the longest class asked for
        return CacheHint(pinned_prefix_tokens=pinned, ttl_s=ttl_s)

    async def _chat(self, messages: ChatMessages, generation_prompt: bool = True) -> np.ndarray:
        return await asyncio.to_thread(self._render_and_encode, messages, generation_prompt)

    def _render_and_encode(self, messages: ChatMessages, generation_prompt: bool) -> np.ndarray:
        if len(messages) > self._max_messages:
            raise invalid(f"at most {self._max_messages} messages are allowed", "messages")
        try:
            text = self._tokenizer.apply_chat_template(messages, add_generation_prompt=generation_prompt)
        except (ChatTemplateError, ValueError) as exc:
            raise invalid(f"the chat template rejected the messages: {exc}", "messages") from exc
        return self._tokenizer.encode(text, add_special_tokens=False)

    def _checked_ids(self, token_ids: object) -> np.ndarray:
        ids = np.asarray(token_ids, dtype=np.int64)
        vocab = self._tokenizer.vocab_size
        if ids.size and (ids.min() < 0 or ids.max() >= vocab):
            raise invalid(f"prompt token ids must lie in [0, {vocab})", "prompt")
        return ids.astype(np.uint32)


def _common_prefix(a: np.ndarray, b: np.ndarray) -> int:
    n = min(len(a), len(b))
    differ = np.flatnonzero(a[:n] != b[:n])
    return int(differ[0]) if differ.size else n
