"""Request bodies of the OpenAI-compatible endpoints.

Types are strict (see :mod:`kvgate.gateway.http_api.body_types`) and every optional field accepts null
(= not set). Every standard OpenAI field is declared, with the extensions of vLLM and SGLang that
clients commonly send; which of them kvgate acts on, accepts without acting on, or refuses (and
why) is :mod:`kvgate.gateway.http_api.openai_support`'s to say, so the refusals are sentences, not
validator wording. docs/OPENAI.md lists them all.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import ConfigDict, Field, model_validator

from kvgate.gateway.http_api.body_types import (
    I64_MAX,
    I64_MIN,
    U32_MAX,
    PromptCacheKey,
    StrictBody,
    Text,
    TokenId,
    TopK,
    TopP,
)

_MaxTokens = Annotated[int, Field(ge=1, le=U32_MAX)]
_Count = Annotated[int, Field(ge=1, le=U32_MAX)]
_Penalty = Annotated[float, Field(ge=-2, le=2, allow_inf_nan=False)]
_Positive = Annotated[float, Field(gt=0, allow_inf_nan=False)]
_Unit = Annotated[float, Field(ge=0, le=1, allow_inf_nan=False)]
_Bias = Annotated[float, Field(ge=-100, le=100, allow_inf_nan=False)]
_Object = dict[str, Any]  # a JSON object kvgate does not look into (declared so null and {} parse)


class TextPart(StrictBody):
    type: Literal["text"]
    text: Text
    cache_control: _Object | None = None  # Anthropic's breakpoint mark, as some clients send it: ignored


class OtherPart(StrictBody):
    """A content part kvgate's text-only models cannot take (refused by name, see openai_support)."""

    model_config = ConfigDict(extra="allow")
    type: Literal["image_url", "input_audio", "file", "refusal", "video_url", "audio_url"]


class FunctionCall(StrictBody):
    """A call's function: ``arguments`` is JSON text (an object)."""

    name: Text
    arguments: Text


class ToolCallPart(StrictBody):
    """One call of an earlier assistant turn."""

    id: Text
    type: Literal["function"] = "function"
    function: FunctionCall


class FunctionDef(StrictBody):
    name: Annotated[Text, Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_.-]+$")]
    description: Text | None = None
    parameters: _Object | None = None  # a JSON schema of the arguments; None: no arguments
    strict: bool | None = None  # a required call is always valid; an `auto` one is read as written


class ToolDef(StrictBody):
    type: Literal["function"]
    function: FunctionDef


class FunctionName(StrictBody):
    name: Text


class NamedToolChoice(StrictBody):
    type: Literal["function"]
    function: FunctionName


class ChatMessage(StrictBody):
    role: Literal["system", "developer", "user", "assistant", "tool", "function"]
    content: Text | list[TextPart | OtherPart] | None = None
    name: Text | None = None
    tool_call_id: Text | None = None
    tool_calls: list[ToolCallPart] | None = None
    function_call: _Object | None = None
    refusal: Text | None = None  # an assistant's earlier refusal: not part of the prompt
    audio: _Object | None = None
    # extensions (vLLM): an assistant's earlier reasoning, not part of the prompt (as vLLM renders it)
    reasoning_content: Text | None = None
    reasoning: Text | None = None

    def text(self) -> str:
        if self.content is None:
            return ""
        if isinstance(self.content, str):
            return self.content
        return "".join(p.text for p in self.content if isinstance(p, TextPart))


class StreamOptions(StrictBody):
    include_usage: bool | None = None
    include_obfuscation: bool | None = None  # OpenAI's padding of stream events: not needed, none sent
    continuous_usage_stats: bool | None = None  # extension (vLLM)


class JsonSchemaFormat(StrictBody):
    """OpenAI's ``response_format.json_schema``: the output must be valid against ``schema``. kvgate
    enforces it by constrained decoding whatever ``strict`` says (strict or not, it always holds)."""

    name: Annotated[Text, Field(min_length=1, max_length=64)]
    description: Text | None = None
    schema_: _Object | None = Field(default=None, alias="schema")  # None: any JSON object
    strict: bool | None = None


class ResponseFormat(StrictBody):
    """``text`` (free text), ``json_object`` (any JSON object) or ``json_schema`` (one valid against
    ``json_schema.schema``)."""

    type: Literal["text", "json_object", "json_schema"]
    json_schema: JsonSchemaFormat | None = None


class StructuredOutputs(StrictBody):
    """vLLM's ``structured_outputs``: one of ``json`` (a schema), ``regex``, ``choice``, ``json_object``
    (the rest is refused by name, see openai_support)."""

    json_: _Object | Text | None = Field(default=None, alias="json")  # a schema, or its JSON text
    regex: Text | None = None
    choice: list[Text] | None = Field(default=None, min_length=1)
    json_object: bool | None = None
    grammar: Text | None = None
    structural_tag: Text | None = None
    whitespace_pattern: Text | None = None
    disable_fallback: bool | None = None
    disable_any_whitespace: bool | None = None
    disable_additional_properties: bool | None = None


class _Sampling(StrictBody):
    """Fields shared by chat and text completions."""

    model: Text = Field(min_length=1)
    temperature: Annotated[float, Field(ge=0, le=2, allow_inf_nan=False)] | None = None
    top_p: TopP | None = None
    seed: Annotated[int, Field(ge=I64_MIN, le=I64_MAX)] | None = None
    stop: Text | list[Text] | None = None
    stream: bool | None = None
    stream_options: StreamOptions | None = None
    n: _Count | None = None
    presence_penalty: _Penalty | None = None
    frequency_penalty: _Penalty | None = None
    logit_bias: dict[str, _Bias] | None = None
    user: Annotated[Text, Field(max_length=256)] | None = None
    prompt_cache_key: PromptCacheKey | None = None
    response_format: ResponseFormat | None = None  # on completions too, as vLLM takes it
    # accepted, not acted on (see openai_support.IGNORED)
    metadata: dict[str, Text] | None = None
    store: bool | None = None
    service_tier: Text | None = None
    safety_identifier: Annotated[Text, Field(max_length=256)] | None = None
    prompt_cache_retention: Text | None = None
    # extensions (vLLM, SGLang)
    top_k: TopK | None = None  # 0 = off (vLLM also takes -1 for off)
    min_p: _Unit | None = None
    repetition_penalty: _Positive | None = None
    min_tokens: Annotated[int, Field(ge=0, le=U32_MAX)] | None = None
    stop_token_ids: list[TokenId] | None = None
    ignore_eos: bool | None = None
    skip_special_tokens: bool | None = None
    spaces_between_special_tokens: bool | None = None
    include_stop_str_in_output: bool | None = None
    # extension (vLLM): separates caches within the caller's tenant; mixed under the tenant's own salt on
    # the server, so it can never reach another tenant's cache, whatever its value
    cache_salt: Annotated[Text, Field(min_length=1, max_length=256)] | None = None
    # extension (vLLM): the output must be valid against this JSON schema (response_format's json_schema)
    guided_json: _Object | None = None
    # extensions (vLLM): other output constraints (see openai_constraints)
    guided_regex: Text | None = None
    guided_choice: list[Text] | None = Field(default=None, min_length=1)
    guided_grammar: Text | None = None
    structured_outputs: StructuredOutputs | None = None
    # extensions (vLLM): the prompt's log-probabilities, and how tokens and prompts are read
    prompt_logprobs: Annotated[int, Field(ge=0, le=20)] | None = None
    return_tokens_as_token_ids: bool | None = None
    add_special_tokens: bool | None = None
    truncate_prompt_tokens: Annotated[int, Field(ge=-1, le=U32_MAX)] | None = None
    allowed_token_ids: list[TokenId] | None = None
    bad_words: list[Text] | None = None
    # extensions (vLLM), accepted, not acted on (see openai_support.IGNORED)
    priority: Annotated[int, Field(ge=I64_MIN, le=I64_MAX)] | None = None
    request_id: Text | None = None  # the request's id stays kvgate's own (see request_ids)

    @model_validator(mode="before")
    @classmethod
    def _top_k_off(cls, data: Any) -> Any:
        # vLLM's "off" is -1; kvgate's (and the wire's) is 0
        if isinstance(data, dict) and data.get("top_k") == -1 and type(data["top_k"]) is int:
            return data | {"top_k": 0}
        return data

    def stop_list(self) -> list[str]:
        if self.stop is None:
            return []
        return [self.stop] if isinstance(self.stop, str) else list(self.stop)

    @property
    def choices(self) -> int:
        return 1 if self.n is None else self.n


class ChatCompletionRequest(_Sampling):
    messages: list[ChatMessage] = Field(min_length=1)
    max_tokens: _MaxTokens | None = None
    max_completion_tokens: _MaxTokens | None = None
    logprobs: bool | None = None
    top_logprobs: Annotated[int, Field(ge=0, le=20)] | None = None
    tools: list[ToolDef] | None = None
    tool_choice: Literal["none", "auto", "required"] | NamedToolChoice | None = None
    parallel_tool_calls: bool | None = None
    functions: list[_Object] | None = None
    function_call: Text | _Object | None = None
    modalities: list[Literal["text", "audio"]] | None = None
    audio: _Object | None = None
    prediction: _Object | None = None  # a latency hint (predicted output): the output is the same without
    reasoning_effort: Text | None = None
    verbosity: Text | None = None
    web_search_options: _Object | None = None
    # extensions (vLLM)
    echo: bool | None = None
    add_generation_prompt: bool | None = None
    continue_final_message: bool | None = None
    chat_template_kwargs: _Object | None = None

    @model_validator(mode="after")
    def _one_limit(self) -> ChatCompletionRequest:
        if self.max_tokens is not None and self.max_completion_tokens is not None:
            raise ValueError("give max_tokens or max_completion_tokens, not both")
        return self

    @property
    def limit(self) -> int | None:
        return self.max_completion_tokens if self.max_completion_tokens is not None else self.max_tokens


Prompt = Text | list[TokenId] | list[Text] | list[list[TokenId]]


class CompletionRequest(_Sampling):
    prompt: Prompt = Field(min_length=1)
    max_tokens: Annotated[int, Field(ge=0, le=U32_MAX)] | None = None  # 0: the prompt alone, with `echo`
    echo: bool | None = None
    logprobs: Annotated[int, Field(ge=0, le=20)] | None = None
    suffix: Text | None = None
    best_of: _Count | None = None

    @property
    def limit(self) -> int:
        return 16 if self.max_tokens is None else self.max_tokens  # OpenAI's default for completions

    def prompts(self) -> list[str | list[int]]:
        """The prompts of the batch, in order (one for a single prompt)."""
        p = self.prompt
        if isinstance(p, str) or (p and isinstance(p[0], int)):
            return [p]  # type: ignore[list-item]
        return list(p)  # type: ignore[arg-type]
