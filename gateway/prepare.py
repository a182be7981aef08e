"""From an API request to a dispatchable :class:`Job`: template, tokenize (off the event loop),
check limits, hash chunks. Raises :class:`ApiError` (400 / 404) for anything the client got wrong."""

from __future__ import annotations

import asyncio
import itertools
import time
import uuid
from dataclasses import dataclass

import numpy as np

from kvgate.gateway.api.auth import rate_limited
from kvgate.gateway.api.errors import ApiError, bad_request
from kvgate.gateway.cache_scope import cache_scope
from kvgate.gateway.settings import GatewaySettings
from kvgate.gateway.tenancy import Caller, RateLimiter
from kvgate.gateway.tenancy.rate_limit import RequestTooLargeError
from kvgate.gateway.upstream.job import Job
from kvgate.proto.chain import chain_hashes
from kvgate.proto.sampling import CacheHint, SamplingParams
from kvgate.tokenizer import ChatTemplateError, Tokenizer


@dataclass(frozen=True, slots=True)
class Generation:
    """What a front asks for: the prompt, how to sample, and the cache hints."""

    model: str
    sampling: dict
    prompt_ids: np.ndarray
    stops: tuple[str, ...]
    cache_key: str | None = None
    cache_hint: CacheHint | None = None
    default_max_tokens: int | None = None
    client_salt: str = ""  # mixed into the tenant's salt: separates caches within a tenant, never across
    shared_prefix: int | None = None  # tokens of the leading system messages (None: no such structure)


class Preparer:
    """Owned by the composition root; safe to share across requests (no mutable state)."""

    def __init__(
        self, settings: GatewaySettings, tokenizer: Tokenizer, limiter: RateLimiter | None = None
    ) -> None:
        self._settings = settings
        self._tokenizer = tokenizer
        self._limiter = limiter

    @property
    def chunk_size(self) -> int:
        return self._settings.cache.chunk_size

    async def system_prefix(
        self, caller: Caller, messages: list[dict[str, str]], ids: np.ndarray
    ) -> int | None:
        """Tokens of ``messages``' leading system messages within ``ids`` (their rendering), when the
        caller opted into a shared namespace; None otherwise. 0 when there is no system message or the
        chat template does not render it as a prefix of the whole conversation."""
        if caller.namespace is None:
            return None
        system = list(itertools.takewhile(lambda m: m["role"] == "system", messages))
        if not system:
            return 0
        prefix = await self.chat_prompt(system, generation_prompt=False)
        n = len(prefix)
        return n if n <= len(ids) and np.array_equal(ids[:n], prefix) else 0

    def check_model(self, model: str) -> None:
        if model != self._settings.model_name:
            raise ApiError(404, f"The model `{model}` does not exist.", param="model", code="model_not_found")

    async def chat_prompt(self, messages: list[dict[str, str]], generation_prompt: bool = True) -> np.ndarray:
        """Token ids of ``messages`` through the chat template, computed in a worker thread."""
        return await asyncio.to_thread(self._render_and_encode, messages, generation_prompt)

    async def text_prompt(self, prompt: str | list[int]) -> np.ndarray:
        if isinstance(prompt, str):
            return await asyncio.to_thread(self._tokenizer.encode, prompt)
        ids = np.asarray(prompt, dtype=np.int64)
        if ids.min() < 0 or ids.max() >= self._tokenizer.vocab_size:
            raise bad_request(f"prompt token ids must lie in [0, {self._tokenizer.vocab_size})", "prompt")
        return ids.astype(np.uint32)

    def job(self, generation: Generation, caller: Caller, charge: bool = True) -> Job:
        """The Job of a prepared generation for ``caller``: 400 for limits and invalid sampling values,
        403 for a shared namespace the tenant may not use, 429 past the tenant's rate limit (checked
        and charged only when ``charge``; a dry run does not charge)."""
        limits = self._settings.limits
        prompt_len = len(generation.prompt_ids)
        room = limits.context_window - prompt_len
        if prompt_len == 0:
            raise bad_request("the prompt is empty", "prompt")
        if room < 1:
            raise bad_request(
                f"This model's maximum context length is {limits.context_window} tokens; the prompt has "
                f"{prompt_len}.",
                "messages",
                "context_length_exceeded",
            )
        sampling = self._sampling(generation, room)
        cache = self._settings.cache
        scope = cache_scope(caller, generation.client_salt, generation.shared_prefix, cache)
        if charge:
            self._charge(caller, prompt_len + sampling.max_tokens)
        return Job(
            request_id=uuid.uuid4().hex,
            token_ids=generation.prompt_ids,
            hashes=chain_hashes(generation.prompt_ids, scope.roots(cache), cache.chunk_size),
            sampling=sampling,
            request_key=uuid.uuid4().int & (2**64 - 1),
            cache_salt=scope.private_salt,
            shared_salt=scope.shared_salt,
            shared_tokens=scope.shared_tokens,
            cache_hint=generation.cache_hint,
            cache_key=generation.cache_key,
            deadline_s=time.monotonic() + limits.request_timeout_s,
        )

    def _charge(self, caller: Caller, tokens: int) -> None:
        if self._limiter is None:
            return
        try:
            wait_s = self._limiter.admit(caller.tenant, tokens)
        except RequestTooLargeError as exc:
            raise ApiError(429, str(exc), "tokens", code="rate_limit_exceeded") from exc
        if wait_s > 0:
            raise rate_limited(caller.tenant, wait_s)

    def _sampling(self, generation: Generation, room: int) -> SamplingParams:
        limits = self._settings.limits
        fields = {k: v for k, v in generation.sampling.items() if v is not None}
        cap = min(room, limits.max_output_tokens)
        wanted = fields.pop("max_tokens", None) or min(generation.default_max_tokens or cap, cap)
        if wanted > cap:
            raise bad_request(
                f"max_tokens is {wanted}, but at most {cap} fit "
                f"(context window {limits.context_window}, prompt {len(generation.prompt_ids)}, "
                f"output limit {limits.max_output_tokens})",
                "max_tokens",
            )
        self._check_stops(generation.stops)
        try:
            return SamplingParams(max_tokens=wanted, stop=generation.stops, **fields)
        except ValueError as exc:
            raise bad_request(str(exc)) from exc

    def _check_stops(self, stops: tuple[str, ...]) -> None:
        limits = self._settings.limits
        if len(stops) > limits.max_stop_strings:
            raise bad_request(f"at most {limits.max_stop_strings} stop strings are allowed", "stop")
        if any(not s or len(s) > limits.max_stop_chars for s in stops):
            raise bad_request(f"stop strings must have 1 to {limits.max_stop_chars} characters", "stop")

    def _render_and_encode(self, messages: list[dict[str, str]], generation_prompt: bool) -> np.ndarray:
        if len(messages) > self._settings.limits.max_messages:
            raise bad_request(
                f"at most {self._settings.limits.max_messages} messages are allowed", "messages"
            )
        try:
            text = self._tokenizer.apply_chat_template(messages, add_generation_prompt=generation_prompt)
        except (ChatTemplateError, ValueError) as exc:
            raise bad_request(f"the chat template rejected the messages: {exc}", "messages") from exc
        return self._tokenizer.encode(text, add_special_tokens=False)

