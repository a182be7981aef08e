"""Encoding that reuses the work of earlier texts: cut at the tokenizer's own boundaries, ids per piece.

A chat rendered by its template is mostly pieces seen before: the system prompt, earlier turns, the
role headers, each between special tokens (``<|im_start|>system\\n...<|im_end|>``). The text is cut
where the tokenizer provably cuts it (``boundaries``), each piece's ids are taken from a
``SegmentCache`` keyed by its exact text or computed (all missing pieces in one batch, the GIL
released), and the ids are concatenated: the ids of the whole text, bit for bit. A tokenizer whose cuts
are not provably exact gets its whole texts cached instead (still exact; reused only for equal texts).
"""

from __future__ import annotations

import numpy as np

from kvgate.common.tokenizer.boundaries import SpecialTokenSplitter, special_token_splitter
from kvgate.common.tokenizer.segment_cache import SegmentCache
from kvgate.common.tokenizer.tokenizer import TokenIds, Tokenizer


class SegmentedEncoder:
    """``encode(text) == tokenizer.encode(text, add_special_tokens=False)``, faster when pieces of
    ``text`` were encoded before. Thread-safe; blocking (call it off the event loop). Owns no global
    state: each instance has the cache it was given, which must serve this tokenizer alone."""

    def __init__(self, tokenizer: Tokenizer, cache: SegmentCache) -> None:
        self._tokenizer = tokenizer
        self._splitter: SpecialTokenSplitter | None = special_token_splitter(tokenizer.backend)
        self.cache = cache

    def encode(self, text: str) -> TokenIds:
        """The token ids of ``text`` as uint32 ``[n]``, special tokens written in it recognised and
        nothing added around it. The returned array is the caller's (never a cached one)."""
        pieces = self._splitter.split(text) if self._splitter is not None else [text]
        if not pieces or pieces == [""]:
            return np.empty(0, dtype=np.uint32)
        known = {piece: self.cache.get(piece) for piece in dict.fromkeys(pieces)}
        missing = [piece for piece, ids in known.items() if ids is None]
        if missing:
            encoded = self._tokenizer.encode_batch(missing, add_special_tokens=False)
            for piece, ids in zip(missing, encoded, strict=True):
                self.cache.put(piece, ids)
                known[piece] = ids
        return np.concatenate([known[piece] for piece in pieces])  # a copy: cached arrays stay shared
