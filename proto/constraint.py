"""``OutputConstraint``: what the output of a constrained generation must match (structured output).

The gateway turns a client's ``response_format`` into one; the worker compiles it against its tokenizer
and masks, at each step, the tokens that cannot continue a match (see ``OutputConstraint`` in
``common.proto``). Immutable and validated on construction, like the other sampling types.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from enum import StrEnum

MAX_CONSTRAINT_CHARS = 1 << 20  # a spec's size bound: 1 Mi characters, far above any real schema


class ConstraintKind(StrEnum):
    """The syntax of a constraint's ``spec``."""

    JSON_SCHEMA = "json_schema"  # a JSON Schema as JSON text; the output is one JSON value valid against it
    LARK = "lark"  # a grammar in llguidance's Lark dialect (``%json`` embeds a schema); used for tool calls


@dataclass(frozen=True, slots=True)
class OutputConstraint:
    """``spec`` in ``kind``'s syntax: for JSON_SCHEMA, the JSON text of a schema (a JSON object); for
    LARK, a grammar's text. ValueError on construction for an empty or oversized spec, or a JSON_SCHEMA
    one that is not JSON of that shape. Whether an engine can *compile* it is its own check (a schema
    can be well-formed JSON and still use what no grammar engine supports)."""

    kind: ConstraintKind
    spec: str

    def __post_init__(self) -> None:
        object.__setattr__(self, "kind", ConstraintKind(self.kind))
        if not isinstance(self.spec, str) or not self.spec:
            raise ValueError("constraint spec must be a non-empty str")
        if len(self.spec) > MAX_CONSTRAINT_CHARS:
            raise ValueError(f"constraint spec has {len(self.spec)} characters, over {MAX_CONSTRAINT_CHARS}")
        if self.kind is ConstraintKind.JSON_SCHEMA:
            _check_schema(self.spec)

    @classmethod
    def json_schema(cls, schema: dict[str, object]) -> OutputConstraint:
        """The constraint of a JSON schema given as a parsed value (serialized compactly, keys kept in
        order: the order of ``properties`` is the order the output writes them in)."""
        return cls(ConstraintKind.JSON_SCHEMA, json.dumps(schema, separators=(",", ":"), ensure_ascii=False))

    @classmethod
    def any_json_object(cls) -> OutputConstraint:
        """OpenAI's ``json_object`` mode: any JSON object."""
        return cls.json_schema({"type": "object"})


def _check_schema(spec: str) -> None:
    """ValueError unless ``spec`` is the JSON text of an object."""
    try:
        schema = json.loads(spec)
    except json.JSONDecodeError as exc:
        raise ValueError(f"the JSON schema is not valid JSON: {exc}") from None
    except RecursionError:
        raise ValueError("the JSON schema is nested too deeply") from None
    if not isinstance(schema, dict):
        raise ValueError("a JSON schema must be a JSON object")
