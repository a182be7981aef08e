"""One sequence's state in the block manager: its tokens, their hashes, its block table."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from kvgate.proto.chain import ChainRoots, chain_hashes
from kvgate.proto.hashing import TokenIds, as_token_array
from kvgate.proto.ids import ChunkHash
from kvgate.workers.kv.block import BlockKey, KVBlock
from kvgate.workers.kv.prompt import Prompt
from kvgate.workers.kv.types import BlockHash, Pin, SeqId

_U32 = 4  # bytes per token id


@dataclass(slots=True, eq=False)
class SeqState:
    """Mutated only by the manager.

    ``tokens``: every known token id (prompt, then generated) as little-endian uint32 bytes.
    ``block_hashes`` / ``chunk_hashes``: the chained hashes of the leading full blocks / chunks, hashed
    on demand, so decode extends the prompt's chains exactly as hashing all tokens at once would.
    ``num_computed``: tokens that have slots; their KV is in ``blocks`` once the step that got the slots
    has run. ``scheduled``: got slots since the last ``end_step``.
    """

    seq_id: SeqId
    roots: ChainRoots
    tokens: bytearray
    block_hashes: list[BlockHash]
    chunk_hashes: list[ChunkHash]
    pin: Pin | None
    blocks: list[KVBlock] = field(default_factory=list)
    num_computed: int = 0
    gpu_cached_tokens: int = 0
    cpu_cached_tokens: int = 0
    scheduled: bool = False

    @classmethod
    def from_prompt(cls, seq_id: SeqId, prompt: Prompt, pin: Pin | None) -> SeqState:
        tokens = bytearray(prompt.token_ids.tobytes())
        return cls(seq_id, prompt.roots, tokens, list(prompt.block_hashes), list(prompt.chunk_hashes), pin)

    @property
    def num_tokens(self) -> int:
        return len(self.tokens) // _U32

    def append(self, token_ids: TokenIds) -> None:
        """Appends generated tokens (validated like the contract's hashing input)."""
        self.tokens += as_token_array(token_ids).tobytes()

    def key(self, index: int, block_size: int, chunk_size: int) -> BlockKey:
        """The cache key of full block ``index`` (its tokens must be known); ``chunk`` is set when the
        block ends a chunk."""
        _extend(self.block_hashes, self.tokens, self.roots, block_size, index + 1)
        parent = self.roots.parent(index, block_size, self.block_hashes[index - 1] if index else None)
        tokens = bytes(self.tokens[index * block_size * _U32 : (index + 1) * block_size * _U32])
        chunk = None
        if (index + 1) * block_size % chunk_size == 0:
            num_chunks = (index + 1) * block_size // chunk_size
            _extend(self.chunk_hashes, self.tokens, self.roots, chunk_size, num_chunks)
            chunk = self.chunk_hashes[num_chunks - 1]
        return BlockKey(self.block_hashes[index], parent, tokens, chunk)

    def chunk_members(self, last_index: int, blocks_per_chunk: int) -> tuple[BlockHash, ...]:
        """The block hashes of the chunk that block ``last_index`` ends (already hashed)."""
        return tuple(self.block_hashes[last_index + 1 - blocks_per_chunk : last_index + 1])


def _extend(hashes: list, tokens: bytearray, roots: ChainRoots, size: int, count: int) -> None:
    # Appends the chained hashes of units len(hashes) .. count-1 of `size` tokens each.
    done = len(hashes)
    if done >= count:
        return
    data = np.frombuffer(bytes(tokens[done * size * _U32 : count * size * _U32]), dtype="<u4")
    if len(data) < (count - done) * size:
        raise ValueError(f"block {count - 1} is not full: its tokens are not known yet")
    hashes.extend(chain_hashes(data, roots, size, done, hashes[-1] if hashes else None))
