"""What the client returns: typed, independent of the generated message classes."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from kvgate.proto import convert, gateway_pb2
from kvgate.proto.sampling import FinishReason, Usage

_REASONS = {
    gateway_pb2.ROUTE_REASON_CACHE_HIT: "cache_hit",
    gateway_pb2.ROUTE_REASON_LOAD_BALANCED: "load_balanced",
    gateway_pb2.ROUTE_REASON_FALLBACK: "fallback",
    gateway_pb2.ROUTE_REASON_PINNED: "pinned",
    gateway_pb2.ROUTE_REASON_LOAD_OVERRIDE: "load_override",
    gateway_pb2.ROUTE_REASON_NEW_PREFIX: "new_prefix",
    gateway_pb2.ROUTE_REASON_HOT_PREFIX_REPLICATED: "hot_prefix_replicated",
}


@dataclass(frozen=True, slots=True)
class TopLogprob:
    """One of the most likely tokens at a position: its text and natural-log probability."""

    token: str
    logprob: float


@dataclass(frozen=True, slots=True)
class TokenLogprob:
    """A token's text and natural-log probability (the model's own log-softmax, before temperature
    and penalties; None for a prompt's first token, which nothing predicts), with the most likely
    tokens' at its position, most likely first (as many as asked: ``top_logprobs`` /
    ``prompt_logprobs``)."""

    token: str
    logprob: float | None
    top: tuple[TopLogprob, ...] = ()

    @classmethod
    def of(cls, entry: gateway_pb2.TextLogprob) -> TokenLogprob:
        top = tuple(TopLogprob(t.token, t.logprob) for t in entry.top)
        return cls(entry.token, entry.logprob if entry.HasField("logprob") else None, top)


def _logprobs(entries: Sequence[gateway_pb2.TextLogprob]) -> tuple[TokenLogprob, ...]:
    return tuple(TokenLogprob.of(e) for e in entries)


@dataclass(frozen=True, slots=True)
class Chunk:
    """New output of a stream: text (may be empty mid-character) and its token ids, of choice
    ``index`` (0 unless ``n`` > 1); ``logprobs``: one per token when asked for (``logprobs=True``),
    else empty; ``prompt_logprobs``: on choice 0's first chunk when asked for, one per prompt token."""

    text: str
    token_ids: tuple[int, ...]
    index: int = 0
    logprobs: tuple[TokenLogprob, ...] = ()
    prompt_logprobs: tuple[TokenLogprob, ...] = ()

    @classmethod
    def of(cls, delta: gateway_pb2.Delta) -> Chunk:
        return cls(delta.text, tuple(delta.token_ids), delta.index, _logprobs(delta.logprobs),
                   _logprobs(delta.prompt_logprobs))  # fmt: skip


@dataclass(frozen=True, slots=True)
class ChoiceEnd:
    """With ``n`` > 1, in a stream: choice ``index`` ended (its last :class:`Chunk` came before);
    the others may go on. The :class:`Generation` follows every choice's end."""

    index: int
    finish_reason: FinishReason

    @classmethod
    def of(cls, done: gateway_pb2.ChoiceDone) -> ChoiceEnd:
        return cls(done.index, convert.finish_reason_from_proto(done.finish_reason))


@dataclass(frozen=True, slots=True)
class Choice:
    """One of a generation's ``n`` completions: its text, token ids, why it ended, and its tokens'
    log-probabilities (one per token when asked for, else empty)."""

    index: int
    text: str
    token_ids: tuple[int, ...]
    finish_reason: FinishReason
    logprobs: tuple[TokenLogprob, ...] = ()

    @classmethod
    def of(cls, index: int, chunks: Sequence[Chunk], finish_reason: FinishReason) -> Choice:
        """Choice ``index`` of ``chunks`` (every choice's, in stream order)."""
        mine = [c for c in chunks if c.index == index]
        return cls(index, "".join(c.text for c in mine), tuple(t for c in mine for t in c.token_ids),
                   finish_reason, tuple(e for c in mine for e in c.logprobs))  # fmt: skip


@dataclass(frozen=True, slots=True)
class Generation:
    """A finished generation. ``usage.cached_tokens``: prompt tokens the worker reused from its cache;
    ``route_reason``: ``cache_hit``, ``load_override``, ``new_prefix``, ``hot_prefix_replicated``,
    ``load_balanced``, ``fallback`` or ``pinned`` (what each means: ``RouteReason`` in gateway.proto).
    ``text``, ``token_ids`` and :attr:`logprobs` are choice 0's; ``choices``: every choice, by index
    (one unless ``n`` > 1; usage counts them all); ``prompt_logprobs``: one per prompt token when asked
    for, else empty."""

    text: str
    token_ids: tuple[int, ...]
    finish_reason: FinishReason
    usage: Usage
    worker_id: str
    route_reason: str
    predicted_cached_tokens: int
    request_id: str
    matched_stop: str | None = None
    choices: tuple[Choice, ...] = ()
    prompt_logprobs: tuple[TokenLogprob, ...] = ()

    @property
    def logprobs(self) -> tuple[TokenLogprob, ...]:
        """Choice 0's tokens' log-probabilities (empty unless asked for)."""
        return self.choices[0].logprobs if self.choices else ()

    @classmethod
    def of(
        cls, chunks: list[Chunk], final: gateway_pb2.Final, ended: Mapping[int, FinishReason] | None = None
    ) -> Generation:
        """The generation of a stream's ``chunks`` and its final message; ``ended``: the finish reason
        of each choice that sent a ``ChoiceDone`` (n > 1); a choice without one ends as the request."""
        ended = ended or {}
        reason = convert.finish_reason_from_proto(final.finish_reason)
        count = 1 + max([0, *ended, *(c.index for c in chunks)])
        choices = tuple(Choice.of(i, chunks, ended.get(i, reason)) for i in range(count))
        return cls(
            text=choices[0].text,
            token_ids=choices[0].token_ids,
            finish_reason=reason,
            usage=convert.usage_from_proto(final.usage),
            worker_id=final.worker_id,
            route_reason=_REASONS.get(final.route_reason, "unspecified"),
            predicted_cached_tokens=final.predicted_cached_tokens,
            request_id=final.request_id,
            matched_stop=final.matched_stop if final.HasField("matched_stop") else None,
            choices=choices,
            prompt_logprobs=next((c.prompt_logprobs for c in chunks if c.prompt_logprobs), ()),
        )


@dataclass(frozen=True, slots=True)
class WorkerMatch:
    """The leading chunks of a prompt one worker holds: ``matched`` = ``gpu`` + ``cpu`` + ``pending``
    (routed there recently, not yet confirmed by the worker)."""

    worker: str
    matched: int
    gpu: int
    cpu: int
    pending: int


@dataclass(frozen=True, slots=True)
class RouteInfo:
    """The gateway's routing decision for a request (a dry run): where it would go, and why."""

    chosen_worker: str
    reason: str
    prompt_tokens: int
    full_chunks: int
    chunk_size: int
    predicted_cached_tokens: int
    matches: tuple[WorkerMatch, ...]  # most matched first

    @property
    def matched_chunks(self) -> dict[str, int]:
        """Worker -> leading chunks it holds."""
        return {m.worker: m.matched for m in self.matches}

    @classmethod
    def of(cls, decision: gateway_pb2.RouteDecision) -> RouteInfo:
        matches = tuple(
            WorkerMatch(m.worker_id, m.matched_chunks, m.gpu_chunks, m.cpu_chunks, m.pending_chunks)
            for m in decision.matches
        )
        return cls(
            chosen_worker=decision.chosen_worker,
            reason=_REASONS.get(decision.reason, "unspecified"),
            prompt_tokens=decision.prompt_tokens,
            full_chunks=decision.full_chunks,
            chunk_size=decision.chunk_size,
            predicted_cached_tokens=decision.predicted_cached_tokens,
            matches=matches,
        )
