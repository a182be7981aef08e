"""Request bodies of the OpenAI-compatible endpoints. Unknown fields are refused (400), and fields
OpenAI defines that kvgate does not implement are accepted only at their no-op values."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

_U32 = 2**32 - 1


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class TextPart(_Strict):
    type: Literal["text"]
    text: str


class ChatMessage(_Strict):
    role: Literal["system", "developer", "user", "assistant", "tool"]
    content: str | list[TextPart] | None = None
    name: str | None = None
    tool_call_id: str | None = None

    def text(self) -> str:
        if self.content is None:
            return ""
        return self.content if isinstance(self.content, str) else "".join(p.text for p in self.content)


class StreamOptions(_Strict):
    include_usage: bool = False


class _Sampling(_Strict):
    """Fields shared by chat and text completions."""

    model: str = Field(min_length=1)
    temperature: Annotated[float, Field(ge=0, le=2)] | None = None
    top_p: Annotated[float, Field(gt=0, le=1)] | None = None
    top_k: Annotated[int, Field(ge=0, le=_U32)] | None = None  # extension (vLLM, SGLang)
    seed: Annotated[int, Field(ge=-(2**63), lt=2**63)] | None = None
    stop: str | list[str] | None = None
    stream: bool = False
    stream_options: StreamOptions | None = None
    n: Literal[1] = 1
    presence_penalty: Literal[0, 0.0] | None = None
    frequency_penalty: Literal[0, 0.0] | None = None
    logprobs: Literal[False] | None = None
    user: str | None = Field(default=None, max_length=256)
    prompt_cache_key: str | None = Field(default=None, max_length=1024)
    ignore_eos: bool = False  # extension

    def stop_list(self) -> list[str]:
        if self.stop is None:
            return []
        return [self.stop] if isinstance(self.stop, str) else list(self.stop)


class ChatCompletionRequest(_Sampling):
    messages: list[ChatMessage] = Field(min_length=1)
    max_tokens: Annotated[int, Field(ge=1, le=_U32)] | None = None
    max_completion_tokens: Annotated[int, Field(ge=1, le=_U32)] | None = None

    @model_validator(mode="after")
    def _one_limit(self) -> ChatCompletionRequest:
        if self.max_tokens is not None and self.max_completion_tokens is not None:
            raise ValueError("give max_tokens or max_completion_tokens, not both")
        return self

    @property
    def limit(self) -> int | None:
        return self.max_completion_tokens if self.max_completion_tokens is not None else self.max_tokens


class CompletionRequest(_Sampling):
    prompt: str | list[int] | list[str] = Field(min_length=1)
    max_tokens: Annotated[int, Field(ge=1, le=_U32)] = 16
    echo: Literal[False] = False
    suffix: None = None

    @model_validator(mode="after")
    def _one_prompt(self) -> CompletionRequest:
        if isinstance(self.prompt, list) and self.prompt and isinstance(self.prompt[0], str):
            if len(self.prompt) != 1:
                raise ValueError("prompt: a batch of several prompts is not supported; send one per request")
            self.prompt = self.prompt[0]
        return self
