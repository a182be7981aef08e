"""An OpenAI body's output constraint as the :class:`~kvgate.proto.constraint.OutputConstraint` the
workers decode under: ``response_format`` (``json_object``, ``json_schema``) or vLLM's extensions,
``guided_json``, ``guided_regex``, ``guided_choice`` and ``structured_outputs`` (``json``, ``regex``,
``choice``, ``json_object``), and ``allowed_token_ids``. A regular expression, a choice or a set of
tokens travels as a Lark grammar (``start: /regex/``; ``start: "a" | "b"``; ``start: <[5,7]>*``),
which the workers' grammar engine (llguidance) compiles.

Whether the constraint compiles is the request core's check (it names the field this module reports).
"""

from __future__ import annotations

import json
from typing import Any

from kvgate.gateway.errors import invalid
from kvgate.gateway.http_api.openai_schemas import (
    ChatCompletionRequest,
    CompletionRequest,
    ResponseFormat,
    StructuredOutputs,
)
from kvgate.proto.constraint import ConstraintKind, OutputConstraint

RESPONSE_FORMAT, GUIDED_JSON = "response_format", "guided_json"
STRUCTURED = "structured_outputs"
_STRUCTURED_REFUSED = ("grammar", "structural_tag", "whitespace_pattern")


def constraint_of(body: ChatCompletionRequest | CompletionRequest) -> tuple[OutputConstraint | None, str]:
    """The body's constraint (None: free text) and the field it came in. INVALID_REQUEST for a
    ``json_schema`` format without its schema object, for two constraining fields at once, or for a
    schema too large to send."""
    given = _given(body)
    if len(given) > 1:
        first, second = given[0][0], given[1][0]
        raise invalid(f"give one of `{first}` and `{second}`, not both", second)
    if not given:
        return None, RESPONSE_FORMAT
    param, make = given[0]
    return make(), param


def _given(body: ChatCompletionRequest | CompletionRequest) -> list[tuple[str, Any]]:
    """``(field, constraint maker)`` of each constraining field the body sets, in a fixed order."""
    fmt, guided = body.response_format, body.guided_json
    given: list[tuple[str, Any]] = []
    if fmt is not None and fmt.type != "text":
        given.append((RESPONSE_FORMAT, lambda: _format(fmt)))
    if guided is not None:
        given.append((GUIDED_JSON, lambda: _schema(guided, GUIDED_JSON)))
    if body.guided_regex is not None:
        given.append(("guided_regex", lambda: _regex(body.guided_regex or "")))
    if body.guided_choice is not None:
        given.append(("guided_choice", lambda: _choice(body.guided_choice or [])))
    if body.structured_outputs is not None:
        given.append((STRUCTURED, lambda: _structured(body.structured_outputs)))
    if body.allowed_token_ids:
        given.append(("allowed_token_ids", lambda: _only_tokens(body.allowed_token_ids or [])))
    return given


def _format(fmt: ResponseFormat) -> OutputConstraint:
    if fmt.type == "json_object":
        return OutputConstraint.any_json_object()
    if fmt.json_schema is None:
        raise invalid("`response_format` of type `json_schema` needs a `json_schema` object", RESPONSE_FORMAT)
    schema = fmt.json_schema.schema_
    return _schema({"type": "object"} if schema is None else schema, RESPONSE_FORMAT)


def _structured(spec: StructuredOutputs | None) -> OutputConstraint:
    """vLLM's ``structured_outputs``: exactly one of ``json``, ``regex``, ``choice``, ``json_object``."""
    assert spec is not None
    for name in _STRUCTURED_REFUSED:
        if getattr(spec, name) is not None:
            raise invalid(f"`structured_outputs.{name}` is not supported by this server", STRUCTURED)
    if spec.disable_additional_properties:  # it would change the schema; the others change no output
        raise invalid("`structured_outputs.disable_additional_properties` is not supported by this server: "
                      "write `additionalProperties: false` in the schema", STRUCTURED)  # fmt: skip
    kinds = [k for k in ("json_", "regex", "choice", "json_object") if getattr(spec, k) not in (None, False)]
    if len(kinds) != 1:
        raise invalid("`structured_outputs` needs exactly one of `json`, `regex`, `choice`, `json_object`",
                      STRUCTURED)  # fmt: skip
    if spec.regex is not None:
        return _regex(spec.regex)
    if spec.choice is not None:
        return _choice(spec.choice)
    if spec.json_object:
        return OutputConstraint.any_json_object()
    schema = spec.json_
    if isinstance(schema, str):
        try:
            schema = json.loads(schema)
        except json.JSONDecodeError as exc:
            raise invalid(f"`structured_outputs.json` is not valid JSON: {exc}", STRUCTURED) from None
    if not isinstance(schema, dict):
        raise invalid("`structured_outputs.json` must be a JSON schema (an object)", STRUCTURED)
    return _schema(schema, STRUCTURED)


def _regex(regex: str) -> OutputConstraint:
    """The output matches ``regex`` whole (as a Lark regex literal: its bare ``/`` escaped)."""
    return OutputConstraint(ConstraintKind.LARK, f"start: /{_slashes_escaped(regex)}/")


def _choice(choices: list[str]) -> OutputConstraint:
    """The output is one of ``choices``, exactly (JSON string literals are Lark's)."""
    return OutputConstraint(ConstraintKind.LARK, "start: " + " | ".join(json.dumps(c) for c in choices))


def _only_tokens(token_ids: list[int]) -> OutputConstraint:
    """The output is made of ``token_ids`` alone (vLLM's ``allowed_token_ids``), EOS allowed as ever."""
    return OutputConstraint(ConstraintKind.LARK, f"start: <[{','.join(map(str, sorted(set(token_ids))))}]>*")


def _slashes_escaped(regex: str) -> str:
    out, escaped = [], False
    for ch in regex:
        if ch == "/" and not escaped:
            out.append("\\/")
        elif ch == "\n":
            out.append("\\n")
        else:
            out.append(ch)
        escaped = ch == "\\" and not escaped
    return "".join(out)


def _schema(schema: dict[str, Any], param: str) -> OutputConstraint:
    try:
        return OutputConstraint.json_schema(schema)
    except ValueError as exc:
        raise invalid(f"the schema in `{param}` cannot be sent: {exc}", param) from exc
