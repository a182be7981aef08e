"""Workloads for the live benchmark: chat requests whose prefixes are shared in known ways."""

from __future__ import annotations

import random
from dataclasses import dataclass

WORDS = (
    "cache",
    "route",
    "worker",
    "prefix",
    "token",
    "chunk",
    "block",
    "tier",
    "gateway",
    "index",
    "epoch",
    "shard",
    "query",
    "answer",
    "latency",
    "budget",
    "memory",
    "replica",
    "stream",
    "queue",
)


@dataclass(frozen=True, slots=True)
class Request:
    """One chat request; ``group`` names the prefix it shares (for the report)."""

    messages: tuple[dict[str, str], ...]
    max_tokens: int
    group: str


def text(seed: int, words: int) -> str:
    """Deterministic filler text of about ``words`` tokens (one word and a number each)."""
    rng = random.Random(seed)
    return " ".join(f"{rng.choice(WORDS)}{rng.randrange(100)}" for _ in range(words))


def shared_prefix(
    groups: int, per_group: int, system_tokens: int, question_tokens: int, max_tokens: int, seed: int = 0
) -> list[Request]:
    """``groups`` system prompts of ``system_tokens``, each followed by ``per_group`` different questions;
    requests of different groups interleave (round robin), as concurrent tenants would."""
    systems = [text(seed * 1000 + g, system_tokens // 2) for g in range(groups)]
    ordered = []
    for i in range(per_group):
        for g in range(groups):
            messages = (
                {"role": "system", "content": systems[g]},
                {
                    "role": "user",
                    "content": text(seed * 1000 + 500 + g * per_group + i, question_tokens // 2),
                },
            )
            ordered.append(Request(messages, max_tokens, f"group-{g}"))
    return ordered


def multi_turn(chats: int, turns: int, turn_tokens: int, max_tokens: int, seed: int = 0) -> list[Request]:
    """``chats`` conversations growing by one user turn each round (the earlier turns are the prefix)."""
    requests = []
    history: list[list[dict[str, str]]] = [[] for _ in range(chats)]
    for turn in range(turns):
        for c in range(chats):
            history[c].append(
                {"role": "user", "content": text(seed * 7919 + c * 100 + turn, turn_tokens // 2)}
            )
            requests.append(Request(tuple(history[c]), max_tokens, f"chat-{c}"))
            history[c].append({"role": "assistant", "content": text(seed + c + turn, 8)})
    return requests
