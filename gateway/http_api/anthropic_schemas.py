"""Request body of the Anthropic-style ``/v1/messages`` endpoint (text, tool use and tool results,
cache_control). Strict JSON types and no unknown fields, as Anthropic does (see
:mod:`kvgate.gateway.http_api.body_types`)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, model_validator

from kvgate.gateway.core.request import MAX_BREAKPOINTS
from kvgate.gateway.http_api.body_types import U32_MAX, PromptCacheKey, StrictBody, Text, TopK, TopP


class CacheControl(StrictBody):
    type: Literal["ephemeral"]
    ttl: Literal["5m", "1h"] = "5m"


class TextBlock(StrictBody):
    type: Literal["text"]
    text: Text
    cache_control: CacheControl | None = None


class ToolUseBlock(StrictBody):
    """A call the assistant made earlier."""

    type: Literal["tool_use"]
    id: Text
    name: Text
    input: dict[str, Any]
    cache_control: CacheControl | None = None


class ToolResultBlock(StrictBody):
    """A tool's result, in a user turn."""

    type: Literal["tool_result"]
    tool_use_id: Text
    content: Text | list[TextBlock] | None = None
    is_error: bool | None = None
    cache_control: CacheControl | None = None

    def text(self) -> str:
        text = "".join(b.text for b in self.content) if isinstance(self.content, list) else self.content or ""
        return f"error: {text}" if self.is_error else text


Block = Annotated[TextBlock | ToolUseBlock | ToolResultBlock, Field(discriminator="type")]


class Message(StrictBody):
    role: Literal["user", "assistant"]
    content: Text | list[Block] = Field(min_length=1)

    def blocks(self) -> list[TextBlock | ToolUseBlock | ToolResultBlock]:
        return [TextBlock(type="text", text=self.content)] if isinstance(self.content, str) else self.content


class ToolDef(StrictBody):
    name: Annotated[Text, Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_-]+$")]
    description: Text | None = None
    input_schema: dict[str, Any]
    type: Literal["custom"] | None = None
    cache_control: CacheControl | None = None


class ToolChoice(StrictBody):
    """``auto`` (the model decides), ``any`` (some tool), ``tool`` (the one named), ``none``."""

    type: Literal["auto", "any", "tool", "none"]
    name: Text | None = None
    disable_parallel_tool_use: bool | None = None


class Metadata(StrictBody):
    user_id: Annotated[Text, Field(max_length=256)] | None = None


class MessagesRequest(StrictBody):
    model: Text = Field(min_length=1)
    max_tokens: Annotated[int, Field(ge=1, le=U32_MAX)]
    messages: list[Message] = Field(min_length=1)
    system: Text | list[TextBlock] | None = None
    stop_sequences: list[Text] | None = None
    temperature: Annotated[float, Field(ge=0, le=1, allow_inf_nan=False)] | None = None
    top_p: TopP | None = None
    top_k: TopK | None = None
    stream: bool = False
    metadata: Metadata | None = None
    # extension (OpenAI's prompt_cache_key, same meaning): a routing hint combined with the prefix
    # hash; metadata.user_id only names the user, as OpenAI's `user` does
    prompt_cache_key: PromptCacheKey | None = None
    tools: list[ToolDef] | None = None
    tool_choice: ToolChoice | None = None

    @model_validator(mode="after")
    def _few_breakpoints(self) -> MessagesRequest:
        blocks = [*self.system_blocks(), *(self.tools or ()), *(b for m in self.messages for b in m.blocks())]
        if sum(b.cache_control is not None for b in blocks) > MAX_BREAKPOINTS:
            raise ValueError(f"at most {MAX_BREAKPOINTS} blocks may have cache_control")
        return self

    def system_blocks(self) -> list[TextBlock]:
        if self.system is None:
            return []
        return [TextBlock(type="text", text=self.system)] if isinstance(self.system, str) else self.system
