"""A tokenized request to a dispatchable :class:`Job`: limits, sampling, the tenant's charge and the
chunk hashes. The gateway's one place that hashes a prompt into chunks."""

from __future__ import annotations

import time
import uuid

import numpy as np
import xxhash

from kvgate.gateway.core.auth import rate_limited
from kvgate.gateway.core.request import GenerateRequest
from kvgate.gateway.core.scope import CacheScope
from kvgate.gateway.errors import ErrorKind, GatewayError, invalid
from kvgate.gateway.settings import GatewaySettings
from kvgate.gateway.tenancy import Caller, RateLimiter
from kvgate.gateway.tenancy.rate_limit import RequestTooLargeError
from kvgate.gateway.upstream.job import Job
from kvgate.proto.chain import chain_hashes
from kvgate.proto.ids import ChunkHash
from kvgate.proto.layout import CacheLayout
from kvgate.proto.sampling import CacheHint, SamplingParams


class JobBuilder:
    """Owned by the composition root; safe to share across requests (its limiter is its only state)."""

    def __init__(self, settings: GatewaySettings, limiter: RateLimiter | None = None) -> None:
        self._settings = settings
        self._limiter = limiter

    def check_size(self, ids: np.ndarray) -> int:
        """Room the prompt leaves in the context window (>= 1); INVALID_REQUEST for an empty prompt
        or one that fills the window (``context_length_exceeded``)."""
        window, prompt_len = self._settings.limits.context_window, len(ids)
        if prompt_len == 0:
            raise invalid("the prompt is empty", "prompt")
        if window - prompt_len < 1:
            message = f"This model's maximum context length is {window} tokens; the prompt has {prompt_len}."
            raise invalid(message, "messages", "context_length_exceeded")
        return window - prompt_len

    def sampling(self, request: GenerateRequest, prompt_len: int, room: int) -> SamplingParams:
        """The sampling parameters, ``max_tokens`` bounded by ``room`` and the output limit;
        INVALID_REQUEST for values out of range."""
        limits = self._settings.limits
        fields = {k: v for k, v in request.sampling.items() if v is not None}
        cap = min(room, limits.max_output_tokens)
        wanted = fields.pop("max_tokens", None) or cap
        if wanted > cap:
            raise invalid(
                f"max_tokens is {wanted}, but at most {cap} fit (context window {limits.context_window}, "
                f"prompt {prompt_len}, output limit {limits.max_output_tokens})",
                "max_tokens",
            )
        self._check_stops(request.stops)
        try:
            return SamplingParams(max_tokens=wanted, stop=request.stops, **fields)
        except ValueError as exc:
            raise invalid(str(exc)) from exc

    def check_hint(self, hint: CacheHint | None) -> None:
        """INVALID_REQUEST for a pinned prefix kept longer than the gateway allows."""
        cap = self._settings.limits.max_cache_ttl_s
        if hint is not None and hint.ttl_s is not None and hint.ttl_s > cap:
            raise invalid(f"cache_hint.ttl_s is {hint.ttl_s}; a prefix may be kept for at most {cap} s",
                          "cache_hint")  # fmt: skip

    def charge(self, caller: Caller, tokens: int) -> None:
        """Takes ``tokens`` from the tenant's allowance: RATE_LIMITED past it, TOKENS_LIMITED when the
        request alone is more than a whole minute's."""
        if self._limiter is None:
            return
        try:
            wait_s = self._limiter.admit(caller.tenant, tokens)
        except RequestTooLargeError as exc:
            raise GatewayError(str(exc), ErrorKind.TOKENS_LIMITED, param="tokens",
                               code="rate_limit_exceeded") from exc  # fmt: skip
        if wait_s > 0:
            raise rate_limited(caller.tenant, wait_s)

    def job(
        self,
        request: GenerateRequest,
        ids: np.ndarray,
        sampling: SamplingParams,
        scope: CacheScope,
        hint: CacheHint | None,
        tenant: str = "",
    ) -> Job:
        """The job: the prompt's chunk hashes under the scope's roots, a fresh request id, the sooner
        of the gateway's and the client's deadlines, and a request key that is a digest of the scope and
        the tokens: routing breaks ties by it, so equal requests break them alike (a dry run predicts
        the generation that follows it; repeats of a prompt land together) and different ones spread.
        A request that asks for its prompt's log-probabilities has no hashes: it reuses no cached block
        (its prompt is computed in full for its logits), so it is routed by load and predicted to
        reuse nothing."""
        cache = self._settings.cache
        deadline_s = time.monotonic() + self._settings.limits.request_timeout_s
        if request.deadline_s is not None:
            deadline_s = min(deadline_s, request.deadline_s)
        return Job(
            request_id=request.request_id or uuid.uuid4().hex,
            token_ids=ids,
            hashes=_hashes(ids, sampling, scope, cache),
            sampling=sampling,
            request_key=_request_key(scope, ids),
            cache_salt=scope.private_salt,
            shared_salt=scope.shared_salt,
            shared_tokens=scope.shared_tokens,
            adapter_id=scope.adapter_id,
            cache_hint=hint,
            cache_key=request.cache_key,
            deadline_s=deadline_s,
            tenant=tenant,
            reads_calls=request.reads_calls,
        )

    def _check_stops(self, stops: tuple[str, ...]) -> None:
        limits = self._settings.limits
        if len(stops) > limits.max_stop_strings:
            raise invalid(f"at most {limits.max_stop_strings} stop strings are allowed", "stop")
        if any(not s or len(s) > limits.max_stop_chars for s in stops):
            raise invalid(f"stop strings must have 1 to {limits.max_stop_chars} characters", "stop")


def _request_key(scope: CacheScope, ids: np.ndarray) -> int:
    """A 64-bit digest of the request's scope and tokens."""
    head = f"{scope.private_salt}\x00{scope.shared_salt}\x00{scope.shared_tokens}\x00{scope.adapter_id}\x00"
    return xxhash.xxh3_64_intdigest(head.encode() + np.asarray(ids, dtype="<u4").tobytes())


def _hashes(
    ids: np.ndarray, sampling: SamplingParams, scope: CacheScope, cache: CacheLayout
) -> list[ChunkHash]:
    if sampling.prompt_logprobs is not None:  # it reuses nothing: nothing to look up
        return []
    return chain_hashes(ids, scope.roots(cache), cache.chunk_size)
