"""gRPC messages <-> the request core: a ``GatewayRequest`` into a core request, the core's text
stream and routing decisions into ``GatewayResponse`` and ``RouteDecision`` messages. Pure."""

from __future__ import annotations

import time
from typing import Any

import grpc

from kvgate.gateway.core.request import (
    Breakpoint,
    ChatInput,
    GenerateRequest,
    PromptInput,
    TextInput,
    TokenInput,
)
from kvgate.gateway.core.textgen import ChoiceEnded, TextDelta, TextDone, TokenText
from kvgate.gateway.errors import invalid
from kvgate.gateway.routing.types import Routed, RouteReason
from kvgate.gateway.upstream.job import Job
from kvgate.proto import common_pb2, convert, gateway_pb2
from kvgate.proto.sampling import DEFAULT_MAX_TOKENS, CacheHint

MAX_CLIENT_SALT_CHARS = 256
MAX_REQUEST_ID_CHARS = 128
_OPTIONAL = ("temperature", "top_p", "top_k", "seed")
_REASONS = {
    RouteReason.CACHE_HIT: gateway_pb2.ROUTE_REASON_CACHE_HIT,
    RouteReason.LOAD_BALANCED: gateway_pb2.ROUTE_REASON_LOAD_BALANCED,
    RouteReason.FALLBACK: gateway_pb2.ROUTE_REASON_FALLBACK,
    RouteReason.PINNED: gateway_pb2.ROUTE_REASON_PINNED,
    RouteReason.LOAD_OVERRIDE: gateway_pb2.ROUTE_REASON_LOAD_OVERRIDE,
    RouteReason.NEW_PREFIX: gateway_pb2.ROUTE_REASON_NEW_PREFIX,
    RouteReason.HOT_PREFIX: gateway_pb2.ROUTE_REASON_HOT_PREFIX_REPLICATED,
}


def metadata(context: grpc.aio.ServicerContext) -> dict[str, str]:
    """The call's text metadata, keys lower-cased (as HTTP headers are compared)."""
    return {k.lower(): v for k, v in (context.invocation_metadata() or ()) if isinstance(v, str)}


def generate_request(
    request: gateway_pb2.GatewayRequest, context: grpc.aio.ServicerContext, default_model: str
) -> GenerateRequest:
    """The core's request for a ``GatewayRequest``, as the .proto defines its defaults: an empty
    ``model`` is ``default_model``, an unset ``max_tokens`` is ``DEFAULT_MAX_TOKENS``; the call's
    deadline, if any, bounds it. INVALID_REQUEST for a request without input, a bad cache hint, an
    over-long cache salt or a ``prompt_cache_key`` the core refuses (the same check as on HTTP)."""
    remaining = context.time_remaining()
    return GenerateRequest(
        request.model or default_model,
        _prompt(request),
        _sampling(request.sampling),
        tuple(request.sampling.stop),
        cache_key=request.prompt_cache_key,
        cache_hint=_hint(request),
        client_salt=_client_salt(request.cache_salt),
        deadline_s=None if remaining is None else time.monotonic() + remaining,
        constraint_param="sampling.constraint",
    )


def client_request_id(request: gateway_pb2.GatewayRequest) -> str:
    """The client's own ``request_id`` ("" when it gave none), checked before anything is done for
    the request. It is the id the client sees; the gateway's own (unique) id is the one workers see."""
    client = request.request_id
    if len(client) > MAX_REQUEST_ID_CHARS or not client.isprintable():
        raise invalid(f"request_id must be at most {MAX_REQUEST_ID_CHARS} printable characters", "request_id")
    return client


def response(
    item: TextDelta | ChoiceEnded | TextDone, job: Job, shown_id: str
) -> gateway_pb2.GatewayResponse:
    """A delta (with its choice and log-probabilities), a choice's end, or the final message with
    usage, the route and ``shown_id`` (the client's request id, else the job's)."""
    if isinstance(item, TextDelta):
        return gateway_pb2.GatewayResponse(delta=_delta(item))
    if isinstance(item, ChoiceEnded):
        reason = convert.finish_reason_to_proto(item.finish_reason)
        done = gateway_pb2.ChoiceDone(index=item.index, finish_reason=reason)
        return gateway_pb2.GatewayResponse(choice_done=done)
    decision = item.routed.decision
    final = gateway_pb2.Final(
        finish_reason=convert.finish_reason_to_proto(item.finish_reason),
        usage=convert.usage_to_proto(item.usage),
        worker_id=decision.worker_id,
        route_reason=_REASONS[decision.reason],
        predicted_cached_tokens=decision.predicted_cached_tokens,
        request_id=shown_id,
    )
    if item.matched_stop is not None:
        final.matched_stop = item.matched_stop
    return gateway_pb2.GatewayResponse(final=final)


def _delta(item: TextDelta) -> gateway_pb2.Delta:
    return gateway_pb2.Delta(
        text=item.text,
        token_ids=item.token_ids,
        index=item.index,
        logprobs=[_logprob(t) for t in item.logprobs],
        prompt_logprobs=[_logprob(t) for t in item.prompt_logprobs],
    )


def _logprob(entry: TokenText) -> gateway_pb2.TextLogprob:
    top = [gateway_pb2.TopLogprob(token=token, logprob=value) for token, value in entry.top]
    return gateway_pb2.TextLogprob(token=entry.token, logprob=entry.logprob, top=top)


def route_decision(job: Job, routed: Routed, chunk_size: int) -> gateway_pb2.RouteDecision:
    """The dry run's answer: what was matched where, what was chosen and why."""
    matches = routed.lookup.matches.values() if routed.lookup is not None else ()
    return gateway_pb2.RouteDecision(
        prompt_tokens=job.prompt_tokens,
        full_chunks=routed.num_chunks,
        chunk_size=chunk_size,
        chosen_worker=routed.decision.worker_id,
        reason=_REASONS[routed.decision.reason],
        predicted_cached_tokens=routed.decision.predicted_cached_tokens,
        matches=[
            gateway_pb2.WorkerMatch(
                worker_id=m.worker_id,
                matched_chunks=m.chunks,
                gpu_chunks=m.gpu_chunks,
                cpu_chunks=m.cpu_chunks,
                pending_chunks=m.pending_chunks,
            )
            for m in matches
        ],
    )


def _prompt(request: gateway_pb2.GatewayRequest) -> PromptInput:
    kind = request.WhichOneof("input")
    if kind == "chat":
        return _chat(request.chat)
    if kind == "prompt":
        return TextInput(request.prompt)
    if kind == "tokens" and request.tokens.ids:
        return TokenInput(list(request.tokens.ids))
    raise invalid("the request has no input: set prompt, chat or tokens", "input")


def _chat(chat: gateway_pb2.ChatMessages) -> ChatInput:
    """The conversation, and a breakpoint after each message with a ``cache_ttl`` (the core checks
    their number and TTL classes, as for /v1/messages)."""
    messages = [{"role": m.role, "content": m.content} for m in chat.messages]
    marks = [(i, m.cache_ttl) for i, m in enumerate(chat.messages) if m.cache_ttl]
    return ChatInput(messages, tuple(Breakpoint(messages[: i + 1], ttl) for i, ttl in marks))


def _sampling(msg: common_pb2.SamplingParams) -> dict[str, Any]:
    fields: dict[str, Any] = {name: getattr(msg, name) for name in _OPTIONAL if msg.HasField(name)}
    fields["max_tokens"] = msg.max_tokens or DEFAULT_MAX_TOKENS
    fields["stop_token_ids"] = tuple(msg.stop_token_ids)
    fields["ignore_eos"] = msg.ignore_eos or None
    fields["logit_bias"] = tuple(msg.logit_bias.items())
    fields["min_tokens"] = msg.min_tokens
    for name in ("presence_penalty", "frequency_penalty", "repetition_penalty", "min_p"):
        if msg.HasField(name):
            fields[name] = getattr(msg, name)
    for name in ("logprobs", "prompt_logprobs"):
        if msg.HasField(name):
            fields[name] = getattr(msg, name)
    if msg.n:
        fields["n"] = msg.n
    if msg.HasField("constraint"):
        try:
            fields["constraint"] = convert.output_constraint_from_proto(msg.constraint)
        except ValueError as exc:
            raise invalid(str(exc), "sampling.constraint") from exc
    return fields


def _hint(request: gateway_pb2.GatewayRequest) -> CacheHint | None:
    if not request.HasField("cache_hint"):
        return None
    try:
        hint = convert.cache_hint_from_proto(request.cache_hint)
    except ValueError as exc:
        raise invalid(str(exc), "cache_hint") from exc
    return hint if hint.active else None


def _client_salt(salt: str) -> str:
    """The client's own cache salt, bounded as on HTTP."""
    if len(salt) > MAX_CLIENT_SALT_CHARS:
        raise invalid(f"cache_salt has more than {MAX_CLIENT_SALT_CHARS} characters", "cache_salt")
    return salt
