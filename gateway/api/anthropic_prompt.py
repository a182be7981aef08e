"""Anthropic messages -> chat-template messages, and where the cache breakpoints fall in tokens.

A ``cache_control`` breakpoint on a block marks the prompt up to the end of that block as a prefix to
keep for the breakpoint's TTL. Its token position is the common prefix of the full prompt's tokens
and the tokens of the conversation rendered only up to that block.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from kvgate.gateway.api.anthropic_schemas import TTL_SECONDS, MessagesRequest, TextBlock
from kvgate.proto.sampling import CacheHint

ChatMessages = list[dict[str, str]]


@dataclass(frozen=True, slots=True)
class Breakpoint:
    """The conversation up to (and including) a marked block, and its TTL."""

    messages: ChatMessages
    ttl_s: int


def chat_messages(body: MessagesRequest) -> tuple[ChatMessages, list[Breakpoint]]:
    """The messages to render and every cache breakpoint, in prompt order."""
    rendered: ChatMessages = []
    breakpoints: list[Breakpoint] = []
    turns = [("system", body.system_blocks())] if body.system is not None else []
    turns += [(m.role, m.blocks()) for m in body.messages]
    for role, blocks in turns:
        for i, block in enumerate(blocks):
            if block.cache_control is not None:
                partial = [*rendered, {"role": role, "content": _join(blocks[: i + 1])}]
                breakpoints.append(Breakpoint(partial, TTL_SECONDS[block.cache_control.ttl]))
        rendered.append({"role": role, "content": _join(blocks)})
    return rendered, breakpoints


def cache_hint(full_ids: np.ndarray, breakpoint_ids: list[np.ndarray], ttls: list[int]) -> CacheHint | None:
    """Pin up to the last breakpoint, for the longest TTL asked (None without breakpoints)."""
    if not breakpoint_ids:
        return None
    pinned = _common_prefix(full_ids, breakpoint_ids[-1])
    return CacheHint(pinned_prefix_tokens=pinned, ttl_s=max(ttls))


def _common_prefix(a: np.ndarray, b: np.ndarray) -> int:
    n = min(len(a), len(b))
    differ = np.flatnonzero(a[:n] != b[:n])
    return int(differ[0]) if differ.size else n


def _join(blocks: list[TextBlock]) -> str:
    return "".join(b.text for b in blocks)
