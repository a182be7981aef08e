"""Request bodies of the OpenAI-compatible endpoints. Strict JSON types, and unknown fields are
refused (400), as OpenAI does (see :mod:`kvgate.gateway.http_api.body_types`); fields OpenAI
defines that kvgate does not implement are accepted only at their no-op values."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from kvgate.gateway.http_api.body_types import (
    I64_MAX,
    I64_MIN,
    U32_MAX,
    StrictBody,
    Text,
    TokenId,
    TopK,
    TopP,
)

_MaxTokens = Annotated[int, Field(ge=1, le=U32_MAX)]


class TextPart(StrictBody):
    type: Literal["text"]
    text: Text


class ChatMessage(StrictBody):
    role: Literal["system", "developer", "user", "assistant", "tool"]
    content: Text | list[TextPart] | None = None
    name: Text | None = None
    tool_call_id: Text | None = None

    def text(self) -> str:
        if self.content is None:
            return ""
        return self.content if isinstance(self.content, str) else "".join(p.text for p in self.content)


class StreamOptions(StrictBody):
    include_usage: bool = False


class _Sampling(StrictBody):
    """Fields shared by chat and text completions."""

    model: Text = Field(min_length=1)
    temperature: Annotated[float, Field(ge=0, le=2, allow_inf_nan=False)] | None = None
    top_p: TopP | None = None
    top_k: TopK | None = None  # extension (vLLM, SGLang)
    seed: Annotated[int, Field(ge=I64_MIN, le=I64_MAX)] | None = None
    stop: Text | list[Text] | None = None
    stream: bool = False
    stream_options: StreamOptions | None = None
    n: Literal[1] = 1
    presence_penalty: Literal[0, 0.0] | None = None
    frequency_penalty: Literal[0, 0.0] | None = None
    logprobs: Literal[False] | None = None
    user: Annotated[Text, Field(max_length=256)] | None = None
    prompt_cache_key: Annotated[Text, Field(max_length=1024)] | None = None
    ignore_eos: bool = False  # extension
    # extension (vLLM): separates caches within the caller's tenant; mixed under the tenant's own salt on
    # the server, so it can never reach another tenant's cache, whatever its value
    cache_salt: Annotated[Text, Field(min_length=1, max_length=256)] | None = None

    def stop_list(self) -> list[str]:
        if self.stop is None:
            return []
        return [self.stop] if isinstance(self.stop, str) else list(self.stop)


class ChatCompletionRequest(_Sampling):
    messages: list[ChatMessage] = Field(min_length=1)
    max_tokens: _MaxTokens | None = None
    max_completion_tokens: _MaxTokens | None = None

    @model_validator(mode="after")
    def _one_limit(self) -> ChatCompletionRequest:
        if self.max_tokens is not None and self.max_completion_tokens is not None:
            raise ValueError("give max_tokens or max_completion_tokens, not both")
        return self

    @property
    def limit(self) -> int | None:
        return self.max_completion_tokens if self.max_completion_tokens is not None else self.max_tokens


class CompletionRequest(_Sampling):
    prompt: Text | list[TokenId] | list[Text] = Field(min_length=1)
    max_tokens: _MaxTokens = 16
    echo: Literal[False] = False
    suffix: None = None

    @model_validator(mode="after")
    def _one_prompt(self) -> CompletionRequest:
        if isinstance(self.prompt, list) and self.prompt and isinstance(self.prompt[0], str):
            if len(self.prompt) != 1:
                raise ValueError("prompt: a batch of several prompts is not supported; send one per request")
            self.prompt = self.prompt[0]
        return self
