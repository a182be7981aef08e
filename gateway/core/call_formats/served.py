"""Which call formats a served model writes, read from its tokenizer: a family's format when one of its
markers is in the chat template's source or among the tokenizer's added tokens (Llama 3.x templates
name ``<|python_tag|>``, Mistral's ``[TOOL_CALLS]``), always after the Hermes form that kvgate's own
rendering asks for. Never chosen by the caller: it is a fact about the model. Also the ids of the
markers (and closing tags) that are special tokens: they are kept in an answer's text when its calls
are read (else decoding with special tokens skipped would drop them before the scanner sees them)."""

from __future__ import annotations

from collections.abc import Sequence

from kvgate.common.tokenizer import Tokenizer
from kvgate.gateway.core.call_formats.format import CallFormat
from kvgate.gateway.core.call_formats.hermes import HERMES
from kvgate.gateway.core.call_formats.llama_json import LLAMA_JSON
from kvgate.gateway.core.call_formats.mistral import MISTRAL

FAMILY_FORMATS: tuple[CallFormat, ...] = (LLAMA_JSON, MISTRAL)  # the registry: one entry per format


def served_formats(tokenizer: Tokenizer) -> tuple[CallFormat, ...]:
    """Hermes, then each family format whose markers ``tokenizer`` knows."""
    template = tokenizer.chat_template.source if tokenizer.chat_template is not None else ""
    added = {t.content for t in tokenizer.backend.get_added_tokens_decoder().values()}
    known = [f for f in FAMILY_FORMATS if any(m in template or m in added for m in f.markers)]
    return (HERMES, *known)


def marker_ids(tokenizer: Tokenizer, formats: Sequence[CallFormat]) -> frozenset[int]:
    """The ids of ``formats``' fixed texts (``CallFormat.kept``: markers, closing tags) that are
    special tokens of ``tokenizer`` (hidden when special tokens are skipped)."""
    markers = {m for f in formats for m in f.kept}
    added = tokenizer.backend.get_added_tokens_decoder().items()
    return frozenset(i for i, t in added if t.special and t.content in markers)
