"""Why a body could not be read, as the gateway's domain error: pydantic's validation errors and the
JSON parser's failures turned into one INVALID_REQUEST with the field at fault (or a 415 when the
body is not JSON at all)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from kvgate.gateway.errors import ErrorKind, GatewayError, invalid
from kvgate.gateway.http_api.body_types import StrictBody

_TYPE_TAGS = frozenset({"str", "int", "float", "bool", "list", "dict", "none"})
_NOT_AN_OBJECT = frozenset({"model_attributes_type", "model_type", "dict_type"})


def _param(loc: Sequence[Any]) -> str | None:
    """The field path of a pydantic error location, without ``body`` and union member tags
    (``messages.0.content``, not ``body.messages.0.content.function-after[...]``; ``tool_choice.type``,
    not ``tool_choice.NamedToolChoice.type``)."""
    tags = _TYPE_TAGS | _body_classes()
    parts = [str(p) for p in loc if isinstance(p, int) or (p.isidentifier() and p not in tags)]
    return ".".join(parts[1:] if parts[:1] == ["body"] else parts) or None


def _body_classes() -> frozenset[str]:
    """The class names of every body part: pydantic tags a union member's errors with them."""
    found, todo = set(), list(StrictBody.__subclasses__())
    while todo:
        cls = todo.pop()
        found.add(cls.__name__)
        todo += cls.__subclasses__()
    return frozenset(found)


def _most_telling(errors: Sequence[Mapping[str, Any]]) -> Mapping[str, Any]:
    """The error to report: of those on the first failing field, the deepest. For a union (``prompt``
    is a string or a list of token ids) that is the member the value came closest to matching."""
    if not errors:
        return {}
    field = _param(errors[0].get("loc", ()))
    top = (field or "").split(".")[0]
    same = [e for e in errors if (_param(e.get("loc", ())) or "").split(".")[0] == top]
    return max(same, key=lambda e: len(e.get("loc", ())))


def invalid_body(errors: Sequence[Mapping[str, Any]], body: Any = None) -> GatewayError:
    """The 400 for a body that failed parsing or validation (``errors`` as pydantic lists them), or a
    415 when ``body`` is still bytes: FastAPI parses only JSON content types."""
    if isinstance(body, bytes | bytearray):
        message = "the body must be JSON, sent with Content-Type: application/json"
        return GatewayError(message, ErrorKind.UNSUPPORTED_MEDIA_TYPE, code="unsupported_media_type")
    first = _most_telling(errors)
    kind, param = first.get("type"), _param(first.get("loc", ()))
    if kind == "json_invalid":
        reason, at = first.get("ctx", {}).get("error", ""), first.get("loc", ("body", "?"))[-1]
        return invalid(f"the body is not valid JSON: {reason} (at character {at})", code="invalid_json")
    if param is None and kind == "missing":
        return invalid("the body is missing: send a JSON object")
    if param is None and kind in _NOT_AN_OBJECT:
        return invalid("the body must be a JSON object")
    return invalid(plain_message(first, param), param)


def plain_message(error: Mapping[str, Any], param: str | None) -> str:
    """One validation error in OpenAI's words (``Invalid 'max_tokens': expected a value >= 1, but got 0
    instead.``), never the validator's own (``Input should be ...``); the message of a ValueError the
    body raised itself is kept as it is."""
    kind, ctx, value = error.get("type", ""), error.get("ctx") or {}, error.get("input")
    name = param or "body"
    if kind == "value_error":
        text = str(error.get("msg", "invalid value")).removeprefix("Value error, ")
        return f"{param}: {text}" if param else text
    if kind == "extra_forbidden":
        return f"Unrecognized request argument supplied: {name}"
    if kind == "missing":
        return f"Missing required parameter: '{name}'."
    if kind in _BOUNDS:
        op, key = _BOUNDS[kind]
        bound = _shown(ctx.get(key))
        return f"Invalid '{name}': expected a value {op} {bound}, but got {_shown(value)} instead."
    if kind in _TYPES:
        return f"Invalid type for '{name}': expected {_TYPES[kind]}, but got {_json_type(value)} instead."
    if kind == "literal_error":
        return f"Invalid value for '{name}': {_shown(value)}. Supported values: {ctx.get('expected')}."
    if kind in ("too_short", "string_too_short"):
        return f"Invalid '{name}': expected at least {_count(ctx.get('min_length'), kind)}, got fewer."
    if kind in ("too_long", "string_too_long"):
        return f"Invalid '{name}': expected at most {_count(ctx.get('max_length'), kind)}, got more."
    if kind == "finite_number":
        return f"Invalid '{name}': expected a finite number, but got {_shown(value)} instead."
    if kind == "string_unicode":
        return f"Invalid '{name}': expected a valid unicode string."
    return f"Invalid value for '{name}'."


_BOUNDS = {
    "greater_than": (">", "gt"),
    "greater_than_equal": (">=", "ge"),
    "less_than": ("<", "lt"),
    "less_than_equal": ("<=", "le"),
}
_TYPES = {
    "int_type": "an integer",
    "int_from_float": "an integer",
    "float_type": "a number",
    "bool_type": "a boolean",
    "string_type": "a string",
    "list_type": "an array",
    "dict_type": "an object",
    "model_type": "an object",
    "model_attributes_type": "an object",
    "none_required": "null",
}


def _count(n: Any, kind: str) -> str:
    unit = "character" if kind.startswith("string") else "item"
    return f"{n} {unit}" if n == 1 else f"{n} {unit}s"


def _json_type(value: Any) -> str:
    """The JSON type name of a decoded value (``a string``, ``an integer``, ...)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    return "an array" if isinstance(value, list) else "an object"


def _shown(value: Any) -> str:
    """A short JSON-ish rendering of an offending value (long ones cut)."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    text = repr(value) if isinstance(value, str) else str(value)
    return text if len(text) <= 40 else text[:37] + "..."


def unreadable_body(cause: BaseException | None) -> GatewayError | None:
    """The 400 for a body the JSON parser gave up on, by why it did (None: not a parse failure)."""
    if isinstance(cause, UnicodeDecodeError):
        return invalid(f"the body is not valid UTF-8 (byte {cause.start})", code="invalid_json")
    if isinstance(cause, RecursionError):
        return invalid("the body is nested too deeply", code="invalid_json")
    if isinstance(cause, ValueError):  # e.g. an integer of more than 4300 digits
        return invalid(f"the body is not valid JSON: {cause}", code="invalid_json")
    return None
