"""An OpenAI body's output constraint: ``response_format`` (``json_object``, ``json_schema``) or vLLM's
``guided_json``, as the :class:`~kvgate.proto.constraint.OutputConstraint` the workers decode under.

Whether the schema compiles is the request core's check (it names the field this module reports).
"""

from __future__ import annotations

from typing import Any

from kvgate.gateway.errors import invalid
from kvgate.gateway.http_api.openai_schemas import ChatCompletionRequest, CompletionRequest
from kvgate.proto.constraint import OutputConstraint

RESPONSE_FORMAT, GUIDED_JSON = "response_format", "guided_json"


def constraint_of(body: ChatCompletionRequest | CompletionRequest) -> tuple[OutputConstraint | None, str]:
    """The body's constraint (None: free text) and the field it came in. INVALID_REQUEST for a
    ``json_schema`` format without its schema object, for both fields at once, or for a schema too
    large to send."""
    fmt, guided = body.response_format, body.guided_json
    if guided is not None:
        if fmt is not None and fmt.type != "text":
            raise invalid("give `response_format` or `guided_json`, not both", GUIDED_JSON)
        return _schema(guided, GUIDED_JSON), GUIDED_JSON
    if fmt is None or fmt.type == "text":
        return None, RESPONSE_FORMAT
    if fmt.type == "json_object":
        return OutputConstraint.any_json_object(), RESPONSE_FORMAT
    if fmt.json_schema is None:
        raise invalid("`response_format` of type `json_schema` needs a `json_schema` object", RESPONSE_FORMAT)
    schema = fmt.json_schema.schema_
    return _schema({"type": "object"} if schema is None else schema, RESPONSE_FORMAT), RESPONSE_FORMAT


def _schema(schema: dict[str, Any], param: str) -> OutputConstraint:
    try:
        return OutputConstraint.json_schema(schema)
    except ValueError as exc:
        raise invalid(f"the schema in `{param}` cannot be sent: {exc}", param) from exc
