"""A prompt as the block manager sees it: token ids plus the block and chunk hashes it is keyed by."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from kvgate.proto.chain import ChainRoots, chain_hashes
from kvgate.proto.hashing import HashRoot, TokenIds, as_token_array
from kvgate.proto.ids import ChunkHash
from kvgate.proto.layout import DEFAULT_BLOCK_SIZE, DEFAULT_CHUNK_SIZE
from kvgate.workers.kv.block import BlockKey
from kvgate.workers.kv.types import BlockHash


@dataclass(frozen=True, slots=True)
class Prompt:
    """The tokens a sequence starts from (a prompt, or a preempted sequence's prompt plus output).

    ``token_ids``: 1-D little-endian uint32 array. ``roots``: the request's chain roots (its own root
    digest, ``HashRoot.digest()`` of deployment secret, model, adapter and cache salt; and a shared
    namespace's root for a leading part, see :mod:`kvgate.proto.chain`; a plain digest is accepted).
    ``block_hashes[i]`` is ``chain_hashes(token_ids, roots, block_size)[i]`` for every full block and
    ``chunk_hashes[j]`` the gateway's ``chain_hashes(token_ids, roots, chunk_size)[j]`` for every
    full chunk. :meth:`build`
    computes them; a hand-made Prompt with other hashes is accepted (tests force collisions that way)
    because the manager verifies token ids and never trusts a hash for correctness.
    """

    token_ids: np.ndarray
    roots: ChainRoots
    block_hashes: tuple[BlockHash, ...]
    chunk_hashes: tuple[ChunkHash, ...]

    def __post_init__(self) -> None:
        if not isinstance(self.roots, ChainRoots):  # a plain root digest: one namespace
            object.__setattr__(self, "roots", ChainRoots(ChunkHash(self.roots)))

    @property
    def root(self) -> ChunkHash:
        """The parent of block 0."""
        return self.roots.first

    @classmethod
    def build(
        cls,
        token_ids: TokenIds,
        root: HashRoot | ChunkHash | ChainRoots,
        *,
        block_size: int = DEFAULT_BLOCK_SIZE,
        chunk_size: int = DEFAULT_CHUNK_SIZE,
    ) -> Prompt:
        """Hashes ``token_ids`` at block and at chunk granularity along the same chain (pure)."""
        ids = as_token_array(token_ids)
        roots = _roots(root)
        blocks = tuple(BlockHash(h) for h in chain_hashes(ids, roots, block_size))
        return cls(ids, roots, blocks, tuple(chain_hashes(ids, roots, chunk_size)))

    def __len__(self) -> int:
        return len(self.token_ids)

    def block_key(self, index: int, block_size: int) -> BlockKey:
        """The key full block ``index`` must match to be reused (pure)."""
        parent = self.roots.parent(index, block_size, self.block_hashes[index - 1] if index else None)
        tokens = self.token_ids[index * block_size : (index + 1) * block_size].tobytes()
        return BlockKey(self.block_hashes[index], parent, tokens)

    def check(self, block_size: int, chunk_size: int) -> None:
        """Raises ValueError unless the prompt is non-empty and has one hash per full block / chunk."""
        n = len(self)
        if n == 0:
            raise ValueError("a prompt needs at least one token")
        if len(self.block_hashes) != n // block_size or len(self.chunk_hashes) != n // chunk_size:
            raise ValueError(f"{n} tokens need {n // block_size} block and {n // chunk_size} chunk hashes")


def _roots(root: HashRoot | ChunkHash | ChainRoots) -> ChainRoots:
    if isinstance(root, ChainRoots):
        return root
    return ChainRoots(root.digest() if isinstance(root, HashRoot) else root)
