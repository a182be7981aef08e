"""What kvgate does with each OpenAI request field it parses but does not simply pass on: accepted and
not acted on (:data:`IGNORED`), or refused for the values it cannot honour (:func:`check`), with a
sentence that says so ("`n` > 8 is not supported by this server"), never a validator's wording.

A field that changes the output is never accepted silently: either kvgate acts on it, or a value
that would change the output is refused. docs/OPENAI.md lists the same fields for users.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kvgate.gateway.errors import invalid
from kvgate.gateway.http_api.openai_schemas import (
    ChatCompletionRequest,
    CompletionRequest,
    OtherPart,
)

MAX_CHOICES = 8  # n: choices per request
MAX_BATCH_CHOICES = 64  # prompts of a completions batch, times n

# Accepted and not acted on: none of them changes the output.
IGNORED = (
    "user",
    "metadata",
    "store",
    "service_tier",
    "safety_identifier",
    "prompt_cache_retention",
    "prediction",
    "reasoning_effort",
    "verbosity",
    "stream_options.include_obfuscation",
    "stream_options.continuous_usage_stats",
    "spaces_between_special_tokens",
    "priority",
    "request_id",
    "messages.reasoning_content",
    "messages.reasoning",
)


@dataclass(frozen=True, slots=True)
class Refusal:
    """A value of ``field`` kvgate cannot honour: ``refused(value)`` says when; ``message`` why."""

    field: str
    refused: Callable[[Any], bool]
    message: str


_RENDERED_BY_KVGATE = frozenset({"messages", "add_generation_prompt", "tools", "documents",
                                 "continue_final_message"})  # fmt: skip
_NOT_HERE = "is not supported by this server"


def _set(value: Any) -> bool:
    return value is not None


def _nonzero(value: Any) -> bool:
    return value is not None and value != 0


def _nonempty(value: Any) -> bool:
    return bool(value)


_SHARED = (
    Refusal("n", lambda n: n is not None and n > MAX_CHOICES,
            f"`n` > {MAX_CHOICES} is not supported by this server"),
    Refusal("skip_special_tokens", lambda v: v is False,
            "`skip_special_tokens: false` is not supported by this server (special tokens are never shown)"),
    Refusal("include_stop_str_in_output", lambda v: v is True,
            "`include_stop_str_in_output` is not supported by this server (stop strings are never returned)"),
    Refusal("guided_grammar", _set, "`guided_grammar` is not supported by this server: use `guided_regex`, "
                                    "`guided_choice` or `guided_json`"),
    Refusal("truncate_prompt_tokens", lambda v: v == 0, "`truncate_prompt_tokens` must be at least 1 (or -1: "
                                                        "the whole prompt)"),
    Refusal("bad_words", _nonempty, "`bad_words` is not supported by this server"),
)  # fmt: skip

_CHAT = (
    Refusal("functions", _nonempty, "`functions` (the deprecated form of `tools`) are not supported by this "
                                    "server: declare them as `tools`"),
    Refusal("function_call", lambda v: v is not None and v not in ("none", "auto"),
            "`function_call` (the deprecated form of `tool_choice`) is not supported by this server: use "
            "`tool_choice`"),
    Refusal("modalities", lambda v: v is not None and "audio" in v,
            "audio output is not supported by this server (its model writes text)"),
    Refusal("audio", _set, "audio output is not supported by this server (its model writes text)"),
    Refusal("web_search_options", _set, "web search is not supported by this server"),
    Refusal("add_special_tokens", lambda v: v is True,
            "`add_special_tokens: true` in chat completions is not supported by this server (the chat "
            "template writes the special tokens)"),
    Refusal("chat_template_kwargs", lambda v: bool(v and set(v) & _RENDERED_BY_KVGATE),
            "`chat_template_kwargs` may not set `messages`, `add_generation_prompt`, `tools`, `documents` or "
            "`continue_final_message` (kvgate renders them from the request)"),
)  # fmt: skip

_COMPLETION = (
    Refusal("suffix", _nonempty, "`suffix` (insertion) is not supported by this server"),
)  # fmt: skip


def check(body: ChatCompletionRequest | CompletionRequest) -> None:
    """Raises INVALID_REQUEST (``param`` naming the field) for the first value kvgate cannot honour."""
    rules = _SHARED + (_CHAT if isinstance(body, ChatCompletionRequest) else _COMPLETION)
    for rule in rules:
        if rule.refused(getattr(body, rule.field)):
            raise invalid(rule.message, rule.field)
    if isinstance(body, CompletionRequest) and body.best_of is not None and body.best_of != body.choices:
        raise invalid("`best_of` other than `n` is not supported by this server", "best_of")
    if isinstance(body, CompletionRequest) and body.max_tokens == 0 and not body.echo:
        raise invalid("`max_tokens: 0` needs `echo: true` (it returns the prompt alone)", "max_tokens")
    if isinstance(body, CompletionRequest) and len(body.prompts()) * body.choices > MAX_BATCH_CHOICES:
        raise invalid(f"a batch of prompts times `n` above {MAX_BATCH_CHOICES} choices is not supported by "
                      "this server", "prompt")  # fmt: skip
    _check_prompt_scores(body)
    if isinstance(body, ChatCompletionRequest) and body.top_logprobs and not body.logprobs:
        raise invalid("`top_logprobs` needs `logprobs: true`", "top_logprobs")
    if isinstance(body, ChatCompletionRequest):
        _check_chat(body)
        _check_messages(body)


def prompt_scored(body: ChatCompletionRequest | CompletionRequest) -> int | None:
    """How many most likely tokens each prompt token is scored with (None: not scored): vLLM's
    ``prompt_logprobs``, or completions' ``echo`` with ``logprobs``."""
    if body.prompt_logprobs is not None:
        return body.prompt_logprobs
    return body.logprobs if isinstance(body, CompletionRequest) and body.echo else None


def _check_prompt_scores(body: ChatCompletionRequest | CompletionRequest) -> None:
    if body.prompt_logprobs is not None and body.stream:
        raise invalid("`prompt_logprobs` in a stream is not supported by this server", "prompt_logprobs")
    echoed = body.logprobs if isinstance(body, CompletionRequest) and body.echo else None
    if body.prompt_logprobs is not None and echoed is not None and echoed != body.prompt_logprobs:
        raise invalid("`prompt_logprobs` with `echo` must equal `logprobs` (the prompt is scored once)",
                      "prompt_logprobs")  # fmt: skip


def _check_chat(body: ChatCompletionRequest) -> None:
    """vLLM's rendering options: a final assistant message is continued only without a new turn."""
    if body.continue_final_message and body.add_generation_prompt:
        raise invalid("`continue_final_message` and `add_generation_prompt: true` cannot be combined",
                      "continue_final_message")  # fmt: skip
    if body.continue_final_message and body.messages[-1].role != "assistant":
        raise invalid("`continue_final_message` needs an assistant message last", "continue_final_message")
    if body.echo and body.stream:
        raise invalid("chat `echo` in a stream is not supported by this server", "echo")


def _check_messages(body: ChatCompletionRequest) -> None:
    for i, message in enumerate(body.messages):
        if message.function_call is not None or message.role == "function":
            raise invalid("`function_call` and `function` messages (the deprecated form of tool calls) are "
                          "not supported by this server: use `tool_calls` and `tool` messages",
                          f"messages.{i}")  # fmt: skip
        parts = message.content if isinstance(message.content, list) else []
        for j, part in enumerate(parts):
            if isinstance(part, OtherPart) and not (part.type == "refusal" and message.role == "assistant"):
                raise invalid(f"`{part.type}` content is not supported by this server (its model reads text)",
                              f"messages.{i}.content.{j}")  # fmt: skip
