"""Twenty JSON schemas of the shapes clients constrain output to: flat and nested objects, arrays,
enums, bounded numbers, required and optional fields, patterns, formats, unions, ``$ref`` and
``$defs``. Every string is bounded (``maxLength``, an enum, a pattern or a format) and every object
closed (``additionalProperties: false``), so that even a random model's output ends within a few
hundred tokens."""

from __future__ import annotations

from typing import Any


def _closed(properties: dict[str, Any], required: list[str] | None = None) -> dict[str, Any]:
    """An object of exactly ``properties`` (all required unless ``required`` says which)."""
    return {
        "type": "object",
        "properties": properties,
        "additionalProperties": False,
        "required": list(properties) if required is None else required,
    }


def _int(low: int, high: int) -> dict[str, Any]:
    return {"type": "integer", "minimum": low, "maximum": high}


_SHORT = {"type": "string", "maxLength": 8}
_SKU = {"type": "string", "pattern": "^[A-Z]{3}-[0-9]{2}$"}
_POINT = _closed({"x": _int(0, 9), "y": _int(0, 9)})
_DATE, _UUID = {"type": "string", "format": "date"}, {"type": "string", "format": "uuid"}
_PT = {"$ref": "#/$defs/pt"}
_ONE_TWO_THREE = {"enum": [1, 2, 3]}
_PAIR = {"type": "array", "prefixItems": [{"type": "boolean"}, _ONE_TWO_THREE], "items": False, "minItems": 2}

SCHEMAS: dict[str, dict[str, Any]] = {
    "flat": _closed({"name": _SHORT, "age": _int(0, 150)}),
    "enum": _closed({"color": {"enum": ["red", "green", "blue"]}}),
    "const": _closed({"kind": {"const": "point"}, "x": _int(-9, 9)}),
    "boolean_and_null": _closed({"done": {"type": "boolean"}, "note": {"type": "null"}}),
    "bounded_number": _closed({"ratio": {"type": "number", "minimum": 0, "maximum": 1}}),
    "exclusive_bounds": _closed({"n": {"type": "integer", "exclusiveMinimum": 10, "exclusiveMaximum": 20}}),
    "nested": _closed({"user": _closed({"id": _int(1, 999), "role": {"enum": ["admin", "guest"]}})}),
    "deeply_nested": _closed({"a": _closed({"b": _closed({"c": {"type": "boolean"}})})}),
    "array_of_ints": _closed({"xs": {"type": "array", "items": _int(0, 99), "minItems": 1, "maxItems": 4}}),
    "array_of_objects": _closed(
        {"items": {"type": "array", "maxItems": 3, "items": _closed({"sku": _SKU, "qty": _int(1, 9)})}}
    ),
    "top_level_array": {"type": "array", "items": {"enum": ["a", "b"]}, "minItems": 2, "maxItems": 3},
    "optional_fields": _closed({"id": _int(0, 9), "nick": _SHORT, "admin": {"type": "boolean"}}, ["id"]),
    "pattern": _closed(
        {
            "zip": {"type": "string", "pattern": "^[0-9]{5}$"},
            "code": {"type": "string", "pattern": "^[a-f]{2,4}$"},
        }
    ),
    "length_bounds": _closed({"word": {"type": "string", "minLength": 2, "maxLength": 5}}),
    "formats": _closed({"day": _DATE, "id": _UUID}),
    "any_of": _closed({"value": {"anyOf": [_int(0, 5), {"enum": ["none", "many"]}]}}),
    "nullable": _closed({"parent": {"type": ["integer", "null"], "minimum": 0, "maximum": 9}}),
    "refs": {"$defs": {"pt": _POINT}, **_closed({"from": _PT, "to": _PT})},
    "tuple": _closed({"pair": _PAIR}),
    "described": {
        "title": "Answer",
        "description": "an answer with its confidence",
        **_closed(
            {
                "answer": {"type": "string", "maxLength": 12, "description": "the answer"},
                "confidence": {"type": "number", "minimum": 0, "maximum": 1},
            }
        ),
    },
}
