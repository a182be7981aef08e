"""Chat templates: a model's Jinja template that turns a list of messages into its prompt text.

Rendered as Hugging Face ``transformers`` renders them, so a prompt is byte-for-byte the one the model was
trained with: an immutable sandboxed Jinja environment with ``trim_blocks`` / ``lstrip_blocks``, the
``loopcontrols`` extension, a ``tojson`` filter that keeps non-ASCII text, the ``raise_exception`` and
``strftime_now`` globals, and the special-token strings (``bos_token``, ``eos_token``, ...) as variables.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

import jinja2
import jinja2.ext
import jinja2.nodes
import jinja2.parser
from jinja2.sandbox import ImmutableSandboxedEnvironment

Message = Mapping[str, Any]


class ChatTemplateError(ValueError):
    """The template is invalid, or it rejected the messages (its ``raise_exception`` was called)."""


class ChatTemplate:
    """A compiled chat template; immutable and safe to share between threads."""

    def __init__(self, source: str, special_tokens: Mapping[str, str] | None = None) -> None:
        """Compile ``source``; ``special_tokens`` (e.g. ``{"bos_token": "<s>"}``) are template variables.
        Raises ``ChatTemplateError`` when the source does not parse."""
        self.source = source
        self._special_tokens = dict(special_tokens or {})
        try:
            self._template = _environment().from_string(source)
        except jinja2.TemplateError as exc:
            raise ChatTemplateError(f"invalid chat template: {exc}") from exc

    def render(self, messages: Sequence[Message], *, add_generation_prompt: bool = True, **extra: Any) -> str:
        """The prompt text for ``messages`` (``{"role": ..., "content": ...}`` dicts); with
        ``add_generation_prompt`` it ends with the header of the assistant's reply. ``extra`` (``tools``,
        ``documents``, ...) are further template variables."""
        variables = {**self._special_tokens, **extra}
        try:
            return self._template.render(
                messages=list(messages), add_generation_prompt=add_generation_prompt, **variables
            )
        except jinja2.TemplateError as exc:
            raise ChatTemplateError(str(exc)) from exc


class _GenerationBlocks(jinja2.ext.Extension):
    """``{% generation %}...{% endgeneration %}`` (marks the assistant's text for training masks in
    Hugging Face) renders its body unchanged."""

    tags = frozenset({"generation"})

    def parse(self, parser: jinja2.parser.Parser) -> jinja2.nodes.Node:
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
        return jinja2.nodes.Scope(body, lineno=lineno)


def _environment() -> ImmutableSandboxedEnvironment:
    env = ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=[_GenerationBlocks, jinja2.ext.loopcontrols]
    )
    env.filters["tojson"] = _tojson
    env.globals["raise_exception"] = _raise_exception
    env.globals["strftime_now"] = _strftime_now
    return env


def _tojson(
    value: Any,
    ensure_ascii: bool = False,
    indent: int | None = None,
    separators: tuple[str, str] | None = None,
    sort_keys: bool = False,
) -> str:
    return json.dumps(
        value, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys
    )


def _raise_exception(message: str) -> None:
    raise jinja2.TemplateError(message)


def _strftime_now(fmt: str) -> str:
    return datetime.now().strftime(fmt)
