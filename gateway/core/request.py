"""What a front asks the request core for, in the core's own terms: no HTTP, no gRPC, no JSON.

A front translates its wire request into a :class:`GenerateRequest` and its caller's credentials
into a :class:`~kvgate.gateway.tenancy.Caller`; everything after that is the core's.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from kvgate.gateway.core.cache_key import routing_key
from kvgate.proto.sampling import CacheHint

ChatMessages = list[dict[str, str]]
"""``[{"role": ..., "content": ...}]``, as the chat template takes them."""


MAX_BREAKPOINTS = 4  # cache breakpoints per request, as Anthropic allows: each costs a tokenization


@dataclass(frozen=True, slots=True)
class Breakpoint:
    """A cache breakpoint (Anthropic ``cache_control``): the conversation up to and including the
    marked block, to keep cached for a named TTL class of the cache layout (``"5m"``, ``"1h"``)."""

    messages: ChatMessages
    ttl_class: str


@dataclass(frozen=True, slots=True)
class ChatInput:
    """A conversation, rendered with the model's chat template. ``generation_prompt``: the assistant's
    header appended (a new turn to answer); ``continue_final``: the last message (an assistant's) left
    open, its end-of-turn cut off, so the model continues its text (vLLM's ``continue_final_message``).
    ``template_vars``: further variables of the chat template (vLLM's ``chat_template_kwargs``, such as
    ``enable_thinking``), as ``(name, value)`` pairs."""

    messages: ChatMessages
    breakpoints: tuple[Breakpoint, ...] = ()
    generation_prompt: bool = True
    continue_final: bool = False
    template_vars: tuple[tuple[str, Any], ...] = ()


@dataclass(frozen=True, slots=True)
class TextInput:
    """Raw text, encoded as is; ``special_tokens``: with what the model adds around a text (its BOS)."""

    text: str
    special_tokens: bool = True


@dataclass(frozen=True, slots=True)
class TokenInput:
    """Token ids, checked against the vocabulary."""

    token_ids: Sequence[int]


PromptInput = ChatInput | TextInput | TokenInput


@dataclass(frozen=True, slots=True)
class GenerateRequest:
    """One generation as a front asks for it.

    ``sampling``: the :class:`~kvgate.proto.sampling.SamplingParams` fields the client set, None for
    unset (``max_tokens`` None: as many as fit). ``cache_key``: the ``prompt_cache_key``, checked and
    normalised on construction by :func:`~kvgate.gateway.core.cache_key.routing_key`, so every front
    applies the one check (INVALID_REQUEST for a bad key; "" becomes None). ``cache_hint``: a pinned
    prefix given in tokens; breakpoints of a :class:`ChatInput` are turned into one. ``client_salt``
    splits the tenant's own cache, never reaches another's. ``deadline_s``: the client's own deadline
    (``time.monotonic``), if sooner than the gateway's. ``request_id``: the id the front already gave
    the request (unique; None: the core assigns one). ``constraint_param``: the front's name of the
    field an output constraint (``sampling["constraint"]``) came in, named when it is refused.
    ``reads_calls``: the answer is read for tool calls (the served model's call markers stay in its
    text). ``keep_last``: only the prompt's last that many tokens are kept (vLLM's
    ``truncate_prompt_tokens``; None: all).
    """

    model: str
    prompt: PromptInput
    sampling: dict[str, Any] = field(default_factory=dict)
    stops: tuple[str, ...] = ()
    cache_key: str | None = None
    cache_hint: CacheHint | None = None
    client_salt: str = ""
    deadline_s: float | None = None
    request_id: str | None = None
    constraint_param: str = "response_format"
    reads_calls: bool = False
    keep_last: int | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "cache_key", routing_key(self.cache_key))
