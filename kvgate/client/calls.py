"""What both clients send: the request message of a call's arguments, and its metadata."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from kvgate.proto import common_pb2, gateway_pb2

NAMESPACE_KEY = "x-kvgate-cache-namespace"
CHANNEL_OPTIONS = (
    # keepalive within what the gateway permits (pings no more often than every 10 s), so long idle
    # streams survive proxies and dead connections are noticed
    ("grpc.keepalive_time_ms", 20_000),
    ("grpc.keepalive_timeout_ms", 10_000),
    ("grpc.keepalive_permit_without_calls", 1),
    ("grpc.http2.max_pings_without_data", 0),
    ("grpc.max_receive_message_length", 64 * 1024 * 1024),
)
Messages = Sequence[Mapping[str, str]]


def request(
    *,
    prompt: str | None = None,
    messages: Messages | None = None,
    token_ids: Sequence[int] | None = None,
    model: str = "",
    max_tokens: int | None = None,
    temperature: float | None = None,
    top_p: float | None = None,
    top_k: int | None = None,
    seed: int | None = None,
    stop: Sequence[str] = (),
    cache_salt: str = "",
    prompt_cache_key: str = "",
    request_id: str = "",
    json_schema: Mapping[str, Any] | None = None,
    n: int | None = None,
    logprobs: bool = False,
    top_logprobs: int | None = None,
    prompt_logprobs: int | None = None,
) -> gateway_pb2.GatewayRequest:
    """The ``GatewayRequest`` of exactly one of ``prompt`` (raw text), ``messages`` (a chat: dicts with
    ``role`` and ``content``) or ``token_ids``; ValueError otherwise. Sampling fields left None take
    the gateway's defaults (``max_tokens`` 16, ``temperature`` 1). ``json_schema``: the output must be
    one JSON value valid against it (constrained decoding; None: free text). ``n``: completions of the
    one prompt (None: 1; ValueError below 1). ``logprobs``: each output token's log-probability, with
    the ``top_logprobs`` most likely tokens' (None: none; ValueError without ``logprobs``, as
    OpenAI's). ``prompt_logprobs``: every prompt token's, with that many most likely tokens' (None: no
    prompt log-probabilities; 0: the token's only; the prompt is then computed in full, not taken from
    the cache). The gateway checks the counts' limits (INVALID_ARGUMENT)."""
    given = [name for name, value in (("prompt", prompt), ("messages", messages), ("token_ids", token_ids))
             if value is not None]  # fmt: skip
    if len(given) != 1:
        raise ValueError(f"give exactly one of prompt, messages or token_ids (got {given or 'none'})")
    if top_logprobs is not None and not logprobs:
        raise ValueError("top_logprobs needs logprobs=True")
    if n is not None and n < 1:
        raise ValueError(f"n must be at least 1 (got {n})")
    output_logprobs = (top_logprobs or 0) if logprobs else None  # the proto's count: top tokens wanted
    optional = {"temperature": temperature, "top_p": top_p, "top_k": top_k, "seed": seed, "n": n,
                "logprobs": output_logprobs, "prompt_logprobs": prompt_logprobs}  # fmt: skip
    sampling = common_pb2.SamplingParams(
        max_tokens=max_tokens or 0, stop=list(stop), **{k: v for k, v in optional.items() if v is not None}
    )
    if json_schema is not None:
        spec = json.dumps(json_schema, separators=(",", ":"))
        sampling.constraint.CopyFrom(
            common_pb2.OutputConstraint(kind=common_pb2.CONSTRAINT_KIND_JSON_SCHEMA, spec=spec)
        )
    message = gateway_pb2.GatewayRequest(
        model=model, sampling=sampling, cache_salt=cache_salt, prompt_cache_key=prompt_cache_key,
        request_id=request_id,
    )  # fmt: skip
    if prompt is not None:
        message.prompt = prompt
    elif messages is not None:
        turns = [gateway_pb2.ChatMessage(role=m["role"], content=m["content"]) for m in messages]
        message.chat.CopyFrom(gateway_pb2.ChatMessages(messages=turns))
    else:
        message.tokens.CopyFrom(gateway_pb2.TokenIds(ids=list(token_ids or ())))
    return message


def metadata(api_key: str | None, namespace: str | None) -> tuple[tuple[str, str], ...]:
    """The call metadata: the API key as a bearer token, the shared cache namespace opted into."""
    pairs = []
    if api_key:
        pairs.append(("authorization", f"Bearer {api_key}"))
    if namespace:
        pairs.append((NAMESPACE_KEY, namespace))
    return tuple(pairs)
