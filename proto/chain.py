"""Where a request's hash chain starts, and where it may switch roots: a shared prefix, then the rest.

A request normally hashes every chunk from one root (its tenant's). A request that opts a leading part
of its prompt into a shared namespace (e.g. a published system prompt) hashes that part from the
namespace's root, so every tenant allowed into the namespace reuses it, and then **rebases** the chain
onto its own root for the rest, so its private suffix stays in its own namespace:

- units (blocks or chunks) that end at or before ``shared_tokens`` chain from ``shared``, exactly as
  ``chunk_hashes(ids[:shared_tokens], shared)``;
- the first unit after it takes as parent ``rebase(private, h_last_shared) = XXH3_128(b"kvgate/rebase/v1"
  || private || h_last_shared)`` and the chain continues from there.

``shared_tokens`` is a multiple of the chunk size (so of the block size): both granularities switch at
the same token. Without a shared part (``shared`` None or ``shared_tokens`` 0) the chain is exactly
``chunk_hashes(ids, private)``: existing hashes are unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import xxhash

from kvgate.proto.hashing import TokenIds, as_token_array, chunk_hashes
from kvgate.proto.ids import ChunkHash
from kvgate.proto.units import TokenCount

_REBASE_TAG = b"kvgate/rebase/v1"


def rebase(private: ChunkHash, last_shared: ChunkHash) -> ChunkHash:
    """The parent of the first private unit after a shared prefix ending in ``last_shared``."""
    return ChunkHash(xxhash.xxh3_128_digest(_REBASE_TAG + bytes(private) + bytes(last_shared)))


@dataclass(frozen=True, slots=True)
class ChainRoots:
    """``private``: the request's own root digest; ``shared``: the shared namespace's root digest, used
    for the first ``shared_tokens`` tokens (a multiple of the chunk size; 0 when ``shared`` is None)."""

    private: ChunkHash
    shared: ChunkHash | None = None
    shared_tokens: TokenCount = 0

    def __post_init__(self) -> None:
        if self.shared_tokens < 0 or (self.shared is None and self.shared_tokens):
            raise ValueError("shared_tokens needs a shared root and must be >= 0")

    @property
    def first(self) -> ChunkHash:
        """The parent of unit 0."""
        return self.shared if self.shared is not None and self.shared_tokens else self.private

    def parent(self, index: int, size: int, previous: ChunkHash | None) -> ChunkHash:
        """The parent of unit ``index`` (``size`` tokens per unit), ``previous`` being unit index-1's
        hash (None for unit 0)."""
        if index == 0 or previous is None:
            return self.first
        if self.shared is not None and self.shared_tokens and index * size == self.shared_tokens:
            return rebase(self.private, previous)
        return previous

    def check(self, chunk_size: int) -> None:
        if self.shared_tokens % chunk_size:
            raise ValueError(f"shared_tokens ({self.shared_tokens}) must be a multiple of {chunk_size}")


def chain_hashes(
    token_ids: TokenIds,
    roots: ChainRoots,
    size: int,
    start: int = 0,
    previous: ChunkHash | None = None,
) -> list[ChunkHash]:
    """Hashes of the full ``size``-token units of ``token_ids``, which are the sequence's tokens from
    unit ``start`` on (``previous``: unit start-1's hash; None when ``start`` is 0). Pure;
    ``chain_hashes(ids, ChainRoots(root), C)`` equals ``chunk_hashes(ids, root, C)``."""
    if roots.shared_tokens % size:
        raise ValueError(f"shared_tokens ({roots.shared_tokens}) must be a multiple of the unit ({size})")
    ids = as_token_array(token_ids)
    end = start + len(ids) // size
    switch = roots.shared_tokens // size if roots.shared is not None else 0
    hashes: list[ChunkHash] = []
    index = start
    while index < end:
        stop = switch if index < switch < end else end
        tokens = np.ascontiguousarray(ids[(index - start) * size : (stop - start) * size])
        segment = chunk_hashes(tokens, roots.parent(index, size, previous), size)
        hashes.extend(segment)
        previous = segment[-1]
        index = stop
    return hashes
