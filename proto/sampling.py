"""The vocabulary of one generation: how to sample, why it ended, what it cost, what to keep cached.

These are the domain types both the gateway and the workers speak; ``kvgate.proto.convert`` maps them to
and from the wire. All are immutable and validate themselves on construction (``ValueError`` with the
offending field named), so a value that exists is a valid one. Bounds that look arbitrary (``2**32``,
``2**63``) are the widths of the wire fields.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum

from kvgate.proto.constraint import OutputConstraint
from kvgate.proto.units import TokenCount

DEFAULT_MAX_TOKENS = 16  # OpenAI's completions default; the HTTP layer sets its own for chat
MAX_LOGPROBS = 20  # most likely tokens reported per position, as OpenAI's top_logprobs allows
_U32_END = 2**32
_I64_END = 2**63


class FinishReason(StrEnum):
    """Why a generation ended; the values are OpenAI's ``finish_reason`` strings."""

    STOP = "stop"  # EOS, a stop token id or a stop string
    LENGTH = "length"  # max_tokens reached, or the context is full
    ABORT = "abort"  # cancelled by the client
    ERROR = "error"  # the worker failed


@dataclass(frozen=True, slots=True)
class SamplingParams:
    """How to sample new tokens. Immutable; validated on construction.

    ``temperature`` >= 0 and finite, 0 = greedy; ``top_p`` in (0, 1], 1 = off; ``top_k`` >= 0, 0 = off;
    ``seed`` None = unseeded, else a signed 64-bit int; ``max_tokens`` >= 1 new tokens; ``stop`` strings
    (non-empty) end the generation and are not returned; ``stop_token_ids`` end it after the token;
    ``ignore_eos`` keeps generating past EOS. Lists given for ``stop`` / ``stop_token_ids`` are stored
    as tuples.

    Logit processing (see ``common.proto``): ``presence_penalty`` / ``frequency_penalty`` in [-2, 2],
    0 = off; ``repetition_penalty`` > 0, 1 = off; ``logit_bias`` ``(token id, bias)`` pairs, bias in
    [-100, 100] (a dict is accepted and stored as sorted pairs); ``min_tokens`` >= 0 new tokens before
    EOS, stop token ids or stop strings can end the sequence; ``min_p`` in [0, 1], 0 = off.
    Outputs: ``logprobs`` None = none, k in [0, 20] = the sampled token's log-probability and the k
    most likely; ``prompt_logprobs`` the same for the prompt's tokens; ``n`` >= 1 choices.
    ``constraint``: what every choice's output must match (structured output); None = free text.
    """

    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    seed: int | None = None
    max_tokens: int = DEFAULT_MAX_TOKENS
    stop: tuple[str, ...] = ()
    stop_token_ids: tuple[int, ...] = ()
    ignore_eos: bool = False
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    repetition_penalty: float = 1.0
    logit_bias: tuple[tuple[int, float], ...] = ()
    min_tokens: int = 0
    min_p: float = 0.0
    logprobs: int | None = None
    prompt_logprobs: int | None = None
    n: int = 1
    constraint: OutputConstraint | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "temperature", _real("temperature", self.temperature))
        object.__setattr__(self, "top_p", _real("top_p", self.top_p))
        object.__setattr__(self, "stop", _stop_strings(self.stop))
        object.__setattr__(self, "stop_token_ids", _token_ids("stop_token_ids", self.stop_token_ids))
        if self.temperature < 0:
            raise ValueError(f"temperature must be >= 0 (0 = greedy), got {self.temperature}")
        if not 0 < self.top_p <= 1:
            raise ValueError(f"top_p must lie in (0, 1], got {self.top_p}")
        _int_in("top_k", self.top_k, 0, _U32_END)
        _int_in("max_tokens", self.max_tokens, 1, _U32_END)
        if self.seed is not None:
            _int_in("seed", self.seed, -_I64_END, _I64_END)
        if not isinstance(self.ignore_eos, bool):
            raise ValueError(f"ignore_eos must be a bool, got {self.ignore_eos!r}")
        self._check_processing()
        for name in ("logprobs", "prompt_logprobs"):
            if getattr(self, name) is not None:
                _int_in(name, getattr(self, name), 0, MAX_LOGPROBS + 1)
        _int_in("n", self.n, 1, _U32_END)
        if self.constraint is not None and not isinstance(self.constraint, OutputConstraint):
            raise ValueError(f"constraint must be an OutputConstraint, got {self.constraint!r}")

    def _check_processing(self) -> None:
        for name in ("presence_penalty", "frequency_penalty", "repetition_penalty", "min_p"):
            object.__setattr__(self, name, _real(name, getattr(self, name)))
        object.__setattr__(self, "logit_bias", _bias(self.logit_bias))
        for name in ("presence_penalty", "frequency_penalty"):
            if not -2 <= getattr(self, name) <= 2:
                raise ValueError(f"{name} must lie in [-2, 2], got {getattr(self, name)}")
        if self.repetition_penalty <= 0:
            raise ValueError(f"repetition_penalty must be > 0 (1 = off), got {self.repetition_penalty}")
        if not 0 <= self.min_p <= 1:
            raise ValueError(f"min_p must lie in [0, 1], got {self.min_p}")
        _int_in("min_tokens", self.min_tokens, 0, _U32_END)

    @property
    def penalized(self) -> bool:
        """True when a penalty, a bias or a minimum length changes the logits before sampling."""
        return bool(
            self.presence_penalty or self.frequency_penalty or self.repetition_penalty != 1
            or self.logit_bias or self.min_tokens
        )  # fmt: skip

    @property
    def greedy(self) -> bool:
        """True when sampling is argmax (temperature 0); top_p, top_k and seed are then irrelevant."""
        return self.temperature == 0


@dataclass(frozen=True, slots=True)
class TokenLogprob:
    """Log-probabilities at one position: ``logprob`` of the token there (<= 0, or -inf), and ``top``:
    ``(token id, log-probability)`` of the most likely tokens, most likely first."""

    logprob: float
    top: tuple[tuple[int, float], ...] = ()


@dataclass(frozen=True, slots=True)
class Usage:
    """Token counts of one request. All >= 0; validated on construction.

    ``cached_tokens`` are the leading prompt tokens whose KV was reused rather than prefilled, split by
    the tier they came from: ``cached_tokens == cached_gpu_tokens + cached_cpu_tokens <= prompt_tokens``.
    ``evicted_predicted_tokens``: the part of the router's predicted cached tokens that the worker did
    not reuse because it evicted them after it received the request (all of the shortfall or 0, see
    ``Usage`` in ``common.proto``); ``<= prompt_tokens - cached_tokens``.
    """

    prompt_tokens: TokenCount = 0
    completion_tokens: TokenCount = 0
    cached_tokens: TokenCount = 0
    cached_gpu_tokens: TokenCount = 0
    cached_cpu_tokens: TokenCount = 0
    evicted_predicted_tokens: TokenCount = 0

    def __post_init__(self) -> None:
        for name in _USAGE_FIELDS:
            _int_in(name, getattr(self, name), 0, _U32_END)
        if self.cached_gpu_tokens + self.cached_cpu_tokens != self.cached_tokens:
            raise ValueError(
                f"cached_gpu_tokens ({self.cached_gpu_tokens}) + cached_cpu_tokens "
                f"({self.cached_cpu_tokens}) must equal cached_tokens ({self.cached_tokens})"
            )
        if self.cached_tokens > self.prompt_tokens:
            raise ValueError(
                f"cached_tokens ({self.cached_tokens}) exceed prompt_tokens ({self.prompt_tokens})"
            )
        if self.cached_tokens + self.evicted_predicted_tokens > self.prompt_tokens:
            raise ValueError(
                f"evicted_predicted_tokens ({self.evicted_predicted_tokens}) exceed the uncached "
                f"prompt tokens ({self.prompt_tokens - self.cached_tokens})"
            )

    @property
    def total_tokens(self) -> int:
        """Prompt plus completion tokens, as OpenAI reports ``total_tokens``."""
        return self.prompt_tokens + self.completion_tokens


_USAGE_FIELDS = (
    "prompt_tokens",
    "completion_tokens",
    "cached_tokens",
    "cached_gpu_tokens",
    "cached_cpu_tokens",
    "evicted_predicted_tokens",
)


@dataclass(frozen=True, slots=True)
class CacheHint:
    """A cache breakpoint: keep the prompt's first ``pinned_prefix_tokens`` tokens cached.

    ``pinned_prefix_tokens`` counts tokens of the rendered prompt; 0 = no breakpoint. ``ttl_s`` > 0 is
    the pinned prefix's TTL in seconds, refreshed on every hit (Anthropic's ``cache_control`` classes
    are 300 and 3600); None = the worker's default TTL.
    """

    pinned_prefix_tokens: TokenCount = 0
    ttl_s: int | None = None

    def __post_init__(self) -> None:
        _int_in("pinned_prefix_tokens", self.pinned_prefix_tokens, 0, _U32_END)
        if self.ttl_s is not None:
            _int_in("ttl_s", self.ttl_s, 1, _U32_END)

    @property
    def active(self) -> bool:
        """True when the hint pins anything (a non-empty prefix)."""
        return self.pinned_prefix_tokens > 0


def _int_in(name: str, value: object, low: int, end: int) -> None:
    """Raises ValueError unless ``value`` is an int (not a bool) with ``low <= value < end``."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{name} must be an int, got {value!r}")
    if not low <= value < end:
        raise ValueError(f"{name} must lie in [{low}, {end}), got {value}")


def _real(name: str, value: object) -> float:
    """``value`` as a finite float; ValueError for non-numbers, bools, NaN and infinities."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{name} must be a number, got {value!r}")
    if not math.isfinite(value):
        raise ValueError(f"{name} must be finite, got {value}")
    return float(value)


def _stop_strings(values: Iterable[str]) -> tuple[str, ...]:
    """``values`` as a tuple of non-empty strings (a lone ``str`` is rejected, not split)."""
    if isinstance(values, str):
        raise ValueError("stop must be a sequence of strings, not a single str")
    stops = tuple(values)
    if not all(isinstance(s, str) and s for s in stops):
        raise ValueError(f"stop strings must be non-empty str, got {stops!r}")
    return stops


def _bias(values: Iterable[tuple[int, float]] | dict[int, float]) -> tuple[tuple[int, float], ...]:
    """``values`` as sorted ``(token id, bias)`` pairs, ids in [0, 2**32), biases finite in [-100, 100]."""
    pairs = sorted(values.items() if isinstance(values, dict) else values)
    out = []
    for token_id, bias in pairs:
        _int_in("logit_bias token id", token_id, 0, _U32_END)
        value = _real("logit_bias", bias)
        if not -100 <= value <= 100:
            raise ValueError(f"logit_bias values must lie in [-100, 100], got {value}")
        out.append((token_id, value))
    return tuple(out)


def _token_ids(name: str, values: Iterable[int]) -> tuple[int, ...]:
    """``values`` as a tuple of token ids in [0, 2**32)."""
    ids = tuple(values)
    for token_id in ids:
        _int_in(name, token_id, 0, _U32_END)
    return ids
