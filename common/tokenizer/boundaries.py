"""Where a tokenizer provably cuts a text: before and after each added token it matches in the raw text.

Hugging Face ``tokenizers`` (0.23: ``Tokenizer::encode_single_sequence`` then
``AddedVocabulary::extract_and_normalize``) encodes a text in two steps:

1. It finds, in the raw text, the added tokens whose ``normalized`` flag is off (``<|im_start|>``,
   ``<|eot_id|>``, llama.cpp's control and user-defined tokens: every one kvgate's tokenizers have),
   leftmost-longest and without overlap, and cuts the text into those tokens and the pieces between.
2. Each piece then goes alone through the normalizer, the normalized added tokens, the pre-tokenizer
   and the model; the text's ids are the pieces' ids in order, then the post-processor runs.

So encoding each piece of step 1 alone and concatenating the ids gives exactly the ids of the whole text,
as long as nothing in step 2 depends on where a piece stands in the text and nothing after it changes
ids. ``special_token_splitter`` checks that, and returns None (encode whole texts) unless:

- the raw-matched added tokens neither strip the spaces around them nor match single words only
  (``lstrip`` / ``rstrip`` / ``single_word`` off): their matches are then exactly the leftmost-longest
  matches of their strings, which ``SpecialTokenSplitter`` finds the same way;
- special tokens are matched at all (``encode_special_tokens`` off);
- the normalizer, pre-tokenizer and post-processor are built-in types (``_SAFE``): each sees a piece
  alone, and none but the Metaspace pre-tokenizer with ``prepend_scheme="first"`` reads the piece's
  offset in the text (checked in tokenizers 0.23's source), so that one is refused. Post-processors add
  nothing and keep the ids when ``add_special_tokens`` is off, the only way pieces are encoded;
- there is no truncation or padding, and the BPE model has no dropout (ids are deterministic).
"""

from __future__ import annotations

import json
import logging
import re
from typing import Any

import tokenizers

log = logging.getLogger(__name__)

# Built-in component types (their serialized "type"), by component: each processes one piece alone.
_SAFE = {
    "normalizer": frozenset({
        "BertNormalizer", "Strip", "StripAccents", "NFC", "NFD", "NFKC", "NFKD", "Sequence", "Lowercase",
        "Nmt", "Precompiled", "Replace", "Prepend", "ByteLevel",
    }),
    "pre_tokenizer": frozenset({
        "BertPreTokenizer", "ByteLevel", "CharDelimiterSplit", "Metaspace", "Whitespace", "Sequence",
        "Split", "Punctuation", "WhitespaceSplit", "Digits", "UnicodeScripts", "FixedLength",
    }),
    "post_processor": frozenset({
        "ByteLevel", "TemplateProcessing", "BertProcessing", "RobertaProcessing", "Sequence",
    }),
}  # fmt: skip
_CHILDREN = ("normalizers", "pretokenizers", "processors")  # a Sequence's parts, by component
_END = ""  # in a trie of tokens: the key marking that a token ends at this node


class SpecialTokenSplitter:
    """Cuts texts where a tokenizer cuts them first (see the module docstring); immutable, thread-safe."""

    def __init__(self, tokens: list[str]) -> None:
        """``tokens``: the strings the tokenizer matches in the raw text (at least one). Raises
        ``RecursionError`` for tokens nested too deep to compile (branching at hundreds of depths)."""
        trie: dict[str, dict] = {}
        for token in tokens:
            node = trie
            for char in token:
                node = node.setdefault(char, {})
            node[_END] = {}
        self._pattern = re.compile("(" + _trie_pattern(trie) + ")")

    def split(self, text: str) -> list[str]:
        """The non-empty pieces of ``text``, in order: each matched token alone, and the text between.
        Invariant: ``"".join(pieces) == text`` and ``encode(text) == concat(encode(p) for p in pieces)``
        (with ``add_special_tokens=False``)."""
        return [piece for piece in self._pattern.split(text) if piece]


def _trie_pattern(node: dict[str, dict]) -> str:
    """A regex matching, at a position, the longest of the strings spelled by ``node``'s paths: one
    alternative per next character (so a position costs the length of a match, not the number of
    tokens), and the string ending here, if one does, tried last (Python tries alternatives in order)."""
    branches = [re.escape(char) + _trie_pattern(child) for char, child in node.items() if char != _END]
    if _END in node:
        branches.append("")
    return branches[0] if len(branches) == 1 else "(?:" + "|".join(branches) + ")"


def special_token_splitter(backend: tokenizers.Tokenizer) -> SpecialTokenSplitter | None:
    """The splitter of ``backend``; None when cutting its texts is not provably exact (the reason is
    logged) or when it has no raw-matched added token to cut at."""
    reason = _unsafe_reason(backend)
    if reason is not None:
        log.info("tokenizer segments: encoding whole texts (%s)", reason)
        return None
    tokens = [t.content for t in backend.get_added_tokens_decoder().values() if not t.normalized]
    if not tokens:
        return None
    try:
        return SpecialTokenSplitter(tokens)
    except (RecursionError, re.error):
        log.info("tokenizer segments: encoding whole texts (added tokens nested too deep)")
        return None


def _unsafe_reason(backend: tokenizers.Tokenizer) -> str | None:
    """Why pieces of ``backend``'s texts might not encode as the whole text does; None when they do."""
    for token in backend.get_added_tokens_decoder().values():
        if not token.normalized and (token.lstrip or token.rstrip or token.single_word):
            return f"added token {token.content!r} strips spaces or matches single words"
    if backend.encode_special_tokens:
        return "special tokens are encoded as text"
    if backend.truncation is not None or backend.padding is not None:
        return "truncation or padding is on"
    if getattr(backend.model, "dropout", None):
        return "the BPE model has dropout"
    for name in _SAFE:
        reason = _component_reason(name, getattr(backend, name))
        if reason is not None:
            return reason
    return None


def _component_reason(name: str, component: Any) -> str | None:
    """Why the normalizer / pre-tokenizer / post-processor ``component`` is not known safe; None if it is."""
    if component is None:
        return None
    try:
        config = json.loads(component.__getstate__())
    except Exception:  # a custom (Python) component cannot be serialized: nothing is known of it
        return f"the {name} is not a built-in one"
    return _config_reason(name, config)


def _config_reason(name: str, config: dict[str, Any]) -> str | None:
    kind = config.get("type")
    if kind not in _SAFE[name]:
        return f"the {name} {kind!r} is not known to process pieces alone"
    if kind == "Metaspace" and config.get("prepend_scheme") == "first":
        return "the Metaspace pre-tokenizer prepends only at the start of the text"
    children = next((config[key] for key in _CHILDREN if key in config), [])
    return next((r for c in children if (r := _config_reason(name, c)) is not None), None)
