"""Output constraints as llguidance grammars: the one translation the gateway (which checks them) and
the workers (which compile them against their tokenizer) share. Torch-free.

kvgate constrains with llguidance: a Rust grammar engine (JSON Schema, regular expressions, Lark)
whose schema compilation is lazy (no pass over the vocabulary per grammar) and whose token masks take
tens of microseconds per sequence on a CPU, computed off the GIL. See docs/OPENAI.md for the JSON
Schema features it supports.

Every JSON schema is compiled with fixed separators (``", "`` between items, ``": "`` after keys) and
no free whitespace: a model can then never stall a constrained generation in endless blanks, and the
output reads like ``json.dumps``'s. :data:`JSON_LAYOUT` is the same layout for a schema embedded in a
Lark grammar (its ``x-guidance`` options).
"""

from __future__ import annotations

import json

import llguidance

from kvgate.proto.constraint import ConstraintKind, OutputConstraint

# How the JSON compiler lays out the output (llguidance's x-guidance options, applied last).
JSON_LAYOUT = {"whitespace_flexible": False, "item_separator": ", ", "key_separator": ": "}


def grammar_of(constraint: OutputConstraint) -> str:
    """The llguidance grammar (its JSON form) of ``constraint``; ValueError for a spec it cannot take
    (one that is not a JSON schema at all). Pure; it does not check that the grammar compiles: see
    :func:`grammar_error`."""
    if constraint.kind is ConstraintKind.JSON_SCHEMA:
        schema = json.loads(constraint.spec)
        return llguidance.LLMatcher.grammar_from_json_schema(schema, overrides=JSON_LAYOUT)
    if constraint.kind is ConstraintKind.LARK:
        return llguidance.LLMatcher.grammar_from_lark(constraint.spec)
    raise ValueError(f"unknown constraint kind {constraint.kind!r}")


def grammar_error(constraint: OutputConstraint) -> str | None:
    """Why ``constraint`` cannot be compiled (llguidance's message), or None when it can. Compiles
    the grammar without a tokenizer: milliseconds for ordinary schemas, more for huge ones (call it
    off any event loop). A grammar that passes still compiles against any tokenizer."""
    try:
        message = llguidance.LLMatcher.validate_grammar(grammar_of(constraint))
    except ValueError as exc:
        return str(exc)
    return message or None
