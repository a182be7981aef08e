"""OpenAI response shapes (dicts), built from the gateway's text stream."""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from kvgate.gateway.core.call_formats import CallReading
from kvgate.gateway.core.textgen import TextDone, TokenText
from kvgate.gateway.core.tools import ToolCall
from kvgate.proto.sampling import Usage


def usage_json(usage: Usage) -> dict[str, Any]:
    return {
        "prompt_tokens": usage.prompt_tokens,
        "completion_tokens": usage.completion_tokens,
        "total_tokens": usage.prompt_tokens + usage.completion_tokens,
        "prompt_tokens_details": {"cached_tokens": usage.cached_tokens},
    }


def route_json(done: TextDone) -> dict[str, Any]:
    """kvgate's extension: where the request ran and why (clients that do not know it ignore it)."""
    decision = done.routed.decision
    return {
        "worker": decision.worker_id,
        "route_reason": decision.reason.value,
        "predicted_cached_tokens": decision.predicted_cached_tokens,
    }


@dataclass(slots=True)
class Choice:
    """One choice of an answer as it is collected: its text, log-probabilities and end, and its prompt's
    tokens with their log-probabilities (completions' ``echo`` with ``logprobs``; else empty)."""

    index: int
    parts: list[str] = field(default_factory=list)
    logprobs: list[TokenText] = field(default_factory=list)
    finish_reason: str | None = None
    prompt_logprobs: list[TokenText] = field(default_factory=list)

    @property
    def text(self) -> str:
        return "".join(self.parts)


def chat_response(
    rid: str, model: str, choices: list[Choice], done: TextDone, logprobs: bool,
    tools: CallReading | None = None, prompt_logprobs: bool = False,
) -> dict[str, Any]:  # fmt: skip
    """``tools``: how calls are read from each choice's text (None: none are); ``prompt_logprobs``: the
    prompt's scores (vLLM's extension) are shown."""
    scored = {"prompt_logprobs": prompt_scores(choices[0].prompt_logprobs)} if prompt_logprobs else {}
    return scored | {
        "id": rid,
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [_chat_choice(c, done, logprobs, tools) for c in choices],
        "usage": usage_json(done.usage),
        "kvgate": route_json(done),
    }


def _chat_choice(c: Choice, done: TextDone, logprobs: bool, tools: CallReading | None) -> dict[str, Any]:
    finish = c.finish_reason or done.finish_reason.value
    message: dict[str, Any] = {"role": "assistant", "content": c.text}
    if tools is not None:
        content, calls = tools.split(c.text)  # as the stream reads it
        message = {"role": "assistant", "content": content}
        if calls:
            message["tool_calls"] = [call_json(call) for call in calls]
            finish = "tool_calls" if finish == "stop" else finish
    return {"index": c.index, "message": message, "finish_reason": finish,
            "logprobs": chat_logprobs(c.logprobs) if logprobs else None}  # fmt: skip


def call_json(call: ToolCall, index: int | None = None) -> dict[str, Any]:
    """A tool call as OpenAI writes it (with its ``index`` in a stream's delta)."""
    out: dict[str, Any] = {} if index is None else {"index": index}
    function = {"name": call.name, "arguments": call.arguments}
    return out | {"id": call.id, "type": "function", "function": function}


def completion_response(
    rid: str, model: str, choices: list[Choice], done: TextDone, logprobs: bool, echo: list[str],
    prompt_logprobs: bool = False,
) -> dict[str, Any]:  # fmt: skip
    """``echo[i]``: the text before choice ``i``'s (its prompt with ``echo``, else empty);
    ``prompt_logprobs``: each choice shows its prompt's scores (vLLM's extension)."""
    return {
        "id": rid,
        "object": "text_completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": c.index,
                "text": echo[c.index] + c.text,
                "finish_reason": c.finish_reason or done.finish_reason.value,
                "logprobs": _echoed_logprobs(c, echo[c.index]) if logprobs else None,
            }
            | ({"prompt_logprobs": prompt_scores(c.prompt_logprobs)} if prompt_logprobs else {})
            for c in choices
        ],
        "usage": usage_json(done.usage),
        "kvgate": route_json(done),
    }


def _echoed_logprobs(c: Choice, echo: str) -> dict[str, Any]:
    """A choice's ``logprobs``: its prompt's tokens first when they were scored (``echo`` with
    ``logprobs``: offsets from the prompt's start), then its own (offsets from the end of ``echo``)."""
    if c.prompt_logprobs and echo:
        return completion_logprobs([*c.prompt_logprobs, *c.logprobs])
    return completion_logprobs(c.logprobs, len(echo))


def prompt_scores(items: Sequence[TokenText]) -> list[dict[str, dict[str, Any]] | None]:
    """vLLM's ``prompt_logprobs``: per prompt token, None for the first (nothing predicts it), then
    ``{token id: {logprob, rank, decoded_token}}`` of the token there and of the most likely ones.
    ``rank`` is 1 for the most likely; the prompt's own token outside the most likely has rank None
    (the workers send the top ones only)."""
    out: list[dict[str, dict[str, Any]] | None] = []
    for t in items:
        if t.logprob is None:
            out.append(None)
            continue
        ranked = {str(i): {"logprob": v, "rank": r, "decoded_token": s}
                  for r, (i, (s, v)) in enumerate(zip(t.top_ids, t.top, strict=True), 1)}  # fmt: skip
        own = {"logprob": t.logprob, "rank": None, "decoded_token": t.token}
        out.append({str(t.token_id): own} | ranked if str(t.token_id) not in ranked else ranked)
    return out


def _entry(token: str, logprob: float | None) -> dict[str, Any]:
    return {"token": token, "logprob": logprob, "bytes": list(token.encode("utf-8"))}


def chat_logprobs(items: Sequence[TokenText]) -> dict[str, Any]:
    """Chat's ``logprobs``: per token its text, log-probability, UTF-8 bytes and the most likely ones."""
    content = [_entry(t.token, t.logprob) | {"top_logprobs": [_entry(s, v) for s, v in t.top]} for t in items]
    return {"content": content, "refusal": None}


def completion_logprobs(items: Sequence[TokenText], offset: int = 0) -> dict[str, Any]:
    """The completions API's ``logprobs``: parallel lists, ``text_offset`` in characters from ``offset``;
    a prompt's first token has ``null`` for its log-probability and its most likely tokens."""
    offsets, at = [], offset
    for t in items:
        offsets.append(at)
        at += len(t.token)
    return {
        "tokens": [t.token for t in items],
        "token_logprobs": [t.logprob for t in items],
        "top_logprobs": [None if t.logprob is None else _most_likely_first(t.top) for t in items],
        "text_offset": offsets,
    }


def _most_likely_first(top: Sequence[tuple[str, float]]) -> dict[str, float]:
    """The completions API's ``{token text: logprob}``; two tokens of one text (bytes of a split
    character both read as U+FFFD) keep the likelier's value."""
    out: dict[str, float] = {}
    for text, logprob in top:
        out.setdefault(text, logprob)
    return out


def chat_chunk(
    rid: str, model: str, delta: dict[str, Any], finish: str | None = None, index: int = 0,
    logprobs: dict[str, Any] | None = None,
) -> dict[str, Any]:  # fmt: skip
    choice = {"index": index, "delta": delta, "finish_reason": finish, "logprobs": logprobs}
    return {
        "id": rid,
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": model,
        "choices": [choice],
    }


def completion_chunk(
    rid: str, model: str, text: str, finish: str | None = None, index: int = 0,
    logprobs: dict[str, Any] | None = None,
) -> dict[str, Any]:  # fmt: skip
    choice = {"index": index, "text": text, "finish_reason": finish, "logprobs": logprobs}
    return {
        "id": rid,
        "object": "text_completion",
        "created": int(time.time()),
        "model": model,
        "choices": [choice],
    }


def usage_chunk(rid: str, model: str, obj: str, usage: Usage) -> dict[str, Any]:
    return {
        "id": rid,
        "object": obj,
        "created": int(time.time()),
        "model": model,
        "choices": [],
        "usage": usage_json(usage),
    }


def sse(payload: dict[str, Any] | str) -> bytes:
    """One server-sent event."""
    data = payload if isinstance(payload, str) else json.dumps(payload, ensure_ascii=False)
    return f"data: {data}\n\n".encode()
