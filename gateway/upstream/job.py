"""A generation request as the gateway dispatches it, and what the dispatcher streams back."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from kvgate.gateway.routing.types import Routed
from kvgate.proto.ids import ChunkHash
from kvgate.proto.sampling import CacheHint, FinishReason, SamplingParams, TokenLogprob, Usage
from kvgate.proto.units import TokenCount


@dataclass(frozen=True, slots=True)
class Job:
    """Everything needed to route and run one request. ``hashes`` are the chunk hashes of
    ``token_ids`` under the request's root; ``deadline_s`` is absolute (``time.monotonic``)."""

    request_id: str
    token_ids: np.ndarray
    hashes: list[ChunkHash]
    sampling: SamplingParams
    request_key: int
    cache_salt: str = ""
    shared_salt: str = ""  # the first shared_tokens tokens hash under this salt (kvgate.proto.chain)
    shared_tokens: TokenCount = 0
    adapter_id: str = ""
    cache_hint: CacheHint | None = None
    cache_key: str | None = None
    deadline_s: float | None = None
    tenant: str = ""  # the name of the tenant it is for (the diagnosis record's key)
    reads_calls: bool = False  # its text is read for tool calls: their special-token markers are shown

    @property
    def prompt_tokens(self) -> int:
        return len(self.token_ids)


@dataclass(frozen=True, slots=True)
class Tokens:
    """New tokens of choice ``index``, in order, with their log-probabilities when asked for (one per
    token, else empty). ``prompt_logprobs``: with ``SamplingParams.prompt_logprobs``, in choice 0's
    first batch, one per prompt token after the first; else empty."""

    token_ids: tuple[int, ...]
    index: int = 0
    logprobs: tuple[TokenLogprob, ...] = ()
    prompt_logprobs: tuple[TokenLogprob, ...] = ()


@dataclass(frozen=True, slots=True)
class ChoiceDone:
    """With ``n`` > 1: choice ``index`` ended (the others may go on); ``completion_tokens`` it made."""

    index: int
    finish_reason: FinishReason
    matched_stop: str | None = None
    completion_tokens: int = 0


@dataclass(frozen=True, slots=True)
class Done:
    """The last message of a stream: why it ended, usage as the worker counted it, and the route."""

    finish_reason: FinishReason
    usage: Usage
    routed: Routed
    matched_stop: str | None = None
    attempts: int = 1
