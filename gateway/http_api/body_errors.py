"""Why a body could not be read, as the gateway's domain error: pydantic's validation errors and the
JSON parser's failures turned into one INVALID_REQUEST with the field at fault (or a 415 when the
body is not JSON at all)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from kvgate.gateway.errors import ErrorKind, GatewayError, invalid

_TYPE_TAGS = frozenset({"str", "int", "float", "bool", "list", "dict", "none"})
_NOT_AN_OBJECT = frozenset({"model_attributes_type", "model_type", "dict_type"})


def _param(loc: Sequence[Any]) -> str | None:
    """The field path of a pydantic error location, without ``body`` and union member tags
    (``messages.0.content``, not ``body.messages.0.content.function-after[...]``)."""
    parts = [str(p) for p in loc if isinstance(p, int) or (p.isidentifier() and p not in _TYPE_TAGS)]
    return ".".join(parts[1:] if parts[:1] == ["body"] else parts) or None


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
    message = str(first.get("msg", "invalid value")).removeprefix("Value error, ")
    return invalid(f"{param}: {message}" if param else message, param)


def unreadable_body(cause: BaseException | None) -> GatewayError | None:
    """The 400 for a body the JSON parser gave up on, by why it did (None: not a parse failure)."""
    if isinstance(cause, UnicodeDecodeError):
        return invalid(f"the body is not valid UTF-8 (byte {cause.start})", code="invalid_json")
    if isinstance(cause, RecursionError):
        return invalid("the body is nested too deeply", code="invalid_json")
    if isinstance(cause, ValueError):  # e.g. an integer of more than 4300 digits
        return invalid(f"the body is not valid JSON: {cause}", code="invalid_json")
    return None
