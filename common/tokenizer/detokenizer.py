"""Streaming detokenization: text deltas from a stream of token ids, never a split character.

One token may hold part of a multi-byte UTF-8 character (byte-level BPE spells an emoji in 2-4 tokens),
and a tokenizer may decode a token differently at the start of a text than after other tokens
(SentencePiece drops a leading space). So each step decodes a short window twice, the tokens already
emitted (``[prefix, read)``) and the same window with the new tokens (``[prefix, end)``), and emits the
difference, holding it back while it ends in U+FFFD: the rest of that character is still to come.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence

from kvgate.common.tokenizer.tokenizer import Tokenizer

REPLACEMENT = "\ufffd"


class IncrementalDetokenizer:
    """Turns one sequence's generated tokens into text deltas; mutable, one per sequence.

    Invariant: ``text`` (everything emitted) + ``flush()`` equals ``decode(generated)`` whenever the
    tokenizer decodes a text the same after ``context`` tokens as alone; deltas contain U+FFFD only for
    token ids whose bytes are not valid UTF-8 (and then only from ``flush``, or once later tokens follow).
    """

    def __init__(
        self,
        tokenizer: Tokenizer,
        prompt_ids: Sequence[int] = (),
        *,
        skip_special_tokens: bool = False,
        context: int = 6,
        keep: Collection[int] = (),
    ) -> None:
        """``prompt_ids``: the prompt; its last ``context`` tokens are decoded with the first new ones,
        so a leading space of the first generated word is kept. ``keep``: special tokens shown even
        when ``skip_special_tokens`` (see ``Tokenizer.decode``)."""
        self._tokenizer = tokenizer
        self._skip_special = skip_special_tokens
        self._keep = keep
        self._ids = [int(i) for i in prompt_ids[len(prompt_ids) - min(context, len(prompt_ids)) :]]
        self._prefix = 0  # start of the decode window
        self._read = len(self._ids)  # tokens before this have been emitted as text
        self.text = ""

    def push(self, token_ids: Iterable[int]) -> str:
        """Append generated ``token_ids``; returns the new text they complete ("" while a character is
        still incomplete)."""
        self._ids.extend(int(i) for i in token_ids)
        emitted = self._decode(self._prefix, self._read)
        current = self._decode(self._prefix, len(self._ids))
        if len(current) <= len(emitted) or current.endswith(REPLACEMENT):
            return ""
        return self._emit(current[len(emitted) :])

    def flush(self) -> str:
        """The text held back at the end of the stream (an incomplete character decodes as U+FFFD)."""
        emitted = self._decode(self._prefix, self._read)
        current = self._decode(self._prefix, len(self._ids))
        return self._emit(current[len(emitted) :]) if len(current) > len(emitted) else ""

    def _emit(self, delta: str) -> str:
        self._prefix, self._read = self._read, len(self._ids)
        self.text += delta
        return delta

    def _decode(self, start: int, end: int) -> str:
        ids = self._ids[start:end]
        return self._tokenizer.decode(ids, skip_special_tokens=self._skip_special, keep=self._keep)
