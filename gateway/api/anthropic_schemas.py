"""Request body of the Anthropic-style ``/v1/messages`` endpoint (text content, cache_control)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

TTL_SECONDS = {"5m": 300, "1h": 3600}


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class CacheControl(_Strict):
    type: Literal["ephemeral"]
    ttl: Literal["5m", "1h"] = "5m"


class TextBlock(_Strict):
    type: Literal["text"]
    text: str
    cache_control: CacheControl | None = None


class Message(_Strict):
    role: Literal["user", "assistant"]
    content: str | list[TextBlock] = Field(min_length=1)

    def blocks(self) -> list[TextBlock]:
        return [TextBlock(type="text", text=self.content)] if isinstance(self.content, str) else self.content


class Metadata(_Strict):
    user_id: str | None = Field(default=None, max_length=256)


class MessagesRequest(_Strict):
    model: str = Field(min_length=1)
    max_tokens: Annotated[int, Field(ge=1, le=2**32 - 1)]
    messages: list[Message] = Field(min_length=1)
    system: str | list[TextBlock] | None = None
    stop_sequences: list[str] | None = None
    temperature: Annotated[float, Field(ge=0, le=1)] | None = None
    top_p: Annotated[float, Field(gt=0, le=1)] | None = None
    top_k: Annotated[int, Field(ge=0)] | None = None
    stream: bool = False
    metadata: Metadata | None = None

    def system_blocks(self) -> list[TextBlock]:
        if self.system is None:
            return []
        return [TextBlock(type="text", text=self.system)] if isinstance(self.system, str) else self.system
