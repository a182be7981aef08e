"""Field types shared by the request bodies of every HTTP front.

Bodies are strict: a field gets exactly its JSON type (``"2"`` is not an integer, ``1`` is not a
boolean) and unknown fields are refused, as OpenAI does, unless they are null: a field set to null
means "not set" wherever it appears, so a client that sends every field it knows of, most of them null,
is served. Text must be valid Unicode: a JSON
escape such as ``"\\ud800"`` decodes to a lone surrogate, which no tokenizer or UTF-8 encoder accepts.
Numbers are finite and integers fit the wire field they travel in.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, model_validator

from kvgate.gateway.core.cache_key import MAX_CACHE_KEY_CHARS

U32_MAX = 2**32 - 1
I64_MIN, I64_MAX = -(2**63), 2**63 - 1


def _unicode(value: str) -> str:
    """``value`` unchanged when it encodes as UTF-8; ValueError (a 400) on a lone surrogate."""
    if not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise ValueError(
                f"text must be valid Unicode (lone surrogate at character {exc.start})"
            ) from None
    return value


Text = Annotated[str, AfterValidator(_unicode)]
PromptCacheKey = Annotated[str, Field(json_schema_extra={"maxLength": MAX_CACHE_KEY_CHARS})]
"""``prompt_cache_key`` on every HTTP front: a string here; its length and Unicode are checked by the
core (:mod:`kvgate.gateway.core.cache_key`), one check for every front, gRPC's too."""
TokenId = Annotated[int, Field(ge=0, le=U32_MAX)]
TopP = Annotated[float, Field(gt=0, le=1, allow_inf_nan=False)]
TopK = Annotated[int, Field(ge=0, le=U32_MAX)]  # 0 = off


class StrictBody(BaseModel):
    """Base of every request body and its parts: exact JSON types, no unknown fields but null ones
    (dropped before validation)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    @model_validator(mode="before")
    @classmethod
    def _drop_null_extras(cls, data: Any) -> Any:
        if not isinstance(data, dict) or all(v is not None or k in cls.model_fields for k, v in data.items()):
            return data
        return {k: v for k, v in data.items() if v is not None or k in cls.model_fields}
