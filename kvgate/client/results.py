"""What the client returns: typed, independent of the generated message classes."""

from __future__ import annotations

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
class Chunk:
    """New output of a stream: text (may be empty mid-character) and its token ids."""

    text: str
    token_ids: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class Generation:
    """A finished generation. ``usage.cached_tokens``: prompt tokens the worker reused from its cache;
    ``route_reason``: ``cache_hit``, ``load_override``, ``new_prefix``, ``hot_prefix_replicated``,
    ``load_balanced``, ``fallback`` or ``pinned`` (what each means: ``RouteReason`` in gateway.proto)."""

    text: str
    token_ids: tuple[int, ...]
    finish_reason: FinishReason
    usage: Usage
    worker_id: str
    route_reason: str
    predicted_cached_tokens: int
    request_id: str
    matched_stop: str | None = None

    @classmethod
    def of(cls, chunks: list[Chunk], final: gateway_pb2.Final) -> Generation:
        return cls(
            text="".join(c.text for c in chunks),
            token_ids=tuple(t for c in chunks for t in c.token_ids),
            finish_reason=convert.finish_reason_from_proto(final.finish_reason),
            usage=convert.usage_from_proto(final.usage),
            worker_id=final.worker_id,
            route_reason=_REASONS.get(final.route_reason, "unspecified"),
            predicted_cached_tokens=final.predicted_cached_tokens,
            request_id=final.request_id,
            matched_stop=final.matched_stop if final.HasField("matched_stop") else None,
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
