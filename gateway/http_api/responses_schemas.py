"""The request body of ``POST /v1/responses`` (OpenAI's Responses API).

Strict as the other bodies (:mod:`kvgate.gateway.http_api.body_types`): exact types, null = not set.
Input items and content parts are told apart by their ``type`` (a message may leave it out); an item,
part, tool or tool choice of a kind kvgate cannot serve parses as an ``Other*`` and is refused by name
(:mod:`kvgate.gateway.http_api.responses_support`), not in a validator's words.
"""

from __future__ import annotations

import functools
import operator
from typing import Annotated, Any, Literal

from pydantic import ConfigDict, Discriminator, Field, Tag

from kvgate.gateway.http_api.body_types import (
    I64_MAX,
    I64_MIN,
    U32_MAX,
    PromptCacheKey,
    StrictBody,
    Text,
    TopP,
)
from kvgate.gateway.http_api.openai_schemas import FunctionDef

_Object = dict[str, Any]


def _kind(known: tuple[str, ...], default: str | None = None) -> Discriminator:
    """A discriminator on ``type``: one of ``known`` (or ``default`` when it is missing), else ``other``."""

    def tag(value: Any) -> str:
        kind = value.get("type", default) if isinstance(value, dict) else getattr(value, "type", None)
        return _tag(kind if kind in known else "other")

    return Discriminator(tag)


def _tag(kind: str) -> str:
    return f"~{kind}"  # not an identifier: left out of the field path an error names (body_errors)


def _tagged(members: dict[str, type], default: str | None = None) -> Any:
    """The union of ``members`` told apart by ``type`` (``other``: any type not named)."""
    tagged = [Annotated[model, Tag(_tag(kind))] for kind, model in members.items()]
    return Annotated[functools.reduce(operator.or_, tagged), _kind(tuple(members), default)]


class _Other(StrictBody):
    model_config = ConfigDict(extra="allow")
    type: Text


class InputText(StrictBody):
    type: Literal["input_text"]
    text: Text


class OutputText(StrictBody):
    """An earlier answer's text, sent back as the SDK returned it."""

    type: Literal["output_text"]
    text: Text
    annotations: list[_Object] | None = None
    logprobs: list[_Object] | None = None


class Refusal(StrictBody):
    type: Literal["refusal"]
    refusal: Text


class OtherPart(_Other):
    """Images, files, audio: refused (kvgate's models read text)."""


Part = _tagged({"input_text": InputText, "output_text": OutputText, "refusal": Refusal, "other": OtherPart})


class MessageItem(StrictBody):
    type: Literal["message"] = "message"
    role: Literal["user", "assistant", "system", "developer"]
    content: Text | list[Part]
    id: Text | None = None
    status: Text | None = None
    phase: Text | None = None

    def text(self) -> str:
        """Its text (an earlier refusal is not part of the prompt)."""
        if isinstance(self.content, str):
            return self.content
        return "".join(p.text for p in self.content if isinstance(p, InputText | OutputText))


class FunctionCallItem(StrictBody):
    """A call an earlier answer made: ``arguments`` is JSON text (an object)."""

    type: Literal["function_call"]
    call_id: Text
    name: Text
    arguments: Text
    id: Text | None = None
    status: Text | None = None


class FunctionCallOutputItem(StrictBody):
    """The result of the call ``call_id``, for the model to read."""

    type: Literal["function_call_output"]
    call_id: Text
    output: Text | list[Part]
    id: Text | None = None
    status: Text | None = None

    def text(self) -> str:
        if isinstance(self.output, str):
            return self.output
        return "".join(p.text for p in self.output if isinstance(p, InputText | OutputText))


class OtherItem(_Other):
    """Reasoning, item references, hosted tools' calls: refused by name."""


Item = _tagged(
    {"message": MessageItem, "function_call": FunctionCallItem,
     "function_call_output": FunctionCallOutputItem, "other": OtherItem},
    default="message",
)  # fmt: skip


class FunctionTool(FunctionDef):
    """A function tool in the Responses shape: ``{"type": "function", "name", "parameters", ...}``."""

    type: Literal["function"]


class OtherTool(_Other):
    """Hosted tools (web search, file search, ...): refused by name."""


Tool = _tagged({"function": FunctionTool, "other": OtherTool})


class NamedFunction(StrictBody):
    type: Literal["function"]
    name: Text


class OtherChoice(_Other):
    """``allowed_tools``, a hosted tool: refused by name."""


Choice = _tagged({"function": NamedFunction, "other": OtherChoice})


class FormatText(StrictBody):
    type: Literal["text"]


class FormatJsonObject(StrictBody):
    type: Literal["json_object"]


class FormatJsonSchema(StrictBody):
    """The output must be valid against ``schema`` (enforced by constrained decoding, strict or not)."""

    type: Literal["json_schema"]
    name: Annotated[Text, Field(min_length=1, max_length=64)]
    schema_: _Object = Field(alias="schema")
    description: Text | None = None
    strict: bool | None = None


class TextConfig(StrictBody):
    format: (
        Annotated[FormatText | FormatJsonObject | FormatJsonSchema, Field(discriminator="type")] | None
    ) = None
    verbosity: Text | None = None  # accepted, not acted on


class StreamOptions(StrictBody):
    include_obfuscation: bool | None = None  # OpenAI's padding of stream events: none sent


class ResponsesRequest(StrictBody):
    model: Text = Field(min_length=1)
    input: Text | list[Item]
    instructions: Text | None = None
    max_output_tokens: Annotated[int, Field(ge=1, le=U32_MAX)] | None = None
    temperature: Annotated[float, Field(ge=0, le=2, allow_inf_nan=False)] | None = None
    top_p: TopP | None = None
    seed: Annotated[int, Field(ge=I64_MIN, le=I64_MAX)] | None = None
    stream: bool | None = None
    stream_options: StreamOptions | None = None
    tools: list[Tool] | None = None
    tool_choice: Literal["none", "auto", "required"] | Choice | None = None
    parallel_tool_calls: bool | None = None
    text: TextConfig | None = None
    store: bool | None = None
    previous_response_id: Annotated[Text, Field(min_length=1, max_length=256)] | None = None
    prompt_cache_key: PromptCacheKey | None = None
    # accepted, not acted on (see responses_support.IGNORED)
    metadata: dict[str, Text] | None = None
    user: Annotated[Text, Field(max_length=256)] | None = None
    safety_identifier: Annotated[Text, Field(max_length=256)] | None = None
    service_tier: Text | None = None
    prompt_cache_retention: Text | None = None
    reasoning: _Object | None = None
    include: list[Text] | None = None
    truncation: Literal["auto", "disabled"] | None = None
    # refused when set (see responses_support)
    background: bool | None = None
    conversation: Text | _Object | None = None
    prompt: _Object | None = None
    max_tool_calls: Annotated[int, Field(ge=1)] | None = None
    top_logprobs: Annotated[int, Field(ge=0, le=20)] | None = None

    @property
    def stored(self) -> bool:
        """Whether the response is kept (OpenAI's default: it is)."""
        return self.store is not False
