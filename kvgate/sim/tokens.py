"""Token ids for trace blocks, and the real chunk hashes of every prompt.

A trace names its blocks by id only. Block ``b``'s token ``j`` is ``splitmix64(splitmix64(b) + j) mod
vocab``: a pure function of (id, position), so equal ids give equal tokens and a short last block is a
prefix of the same id's full block, as a generator seeded by the id would give -- but vectorised over a
whole prompt at once (~50 µs for 15k tokens), so nothing has to be cached per block.
The prompts are then cut and hashed by :func:`kvgate.proto.hashing.chunk_hashes`, the gateway's code.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from kvgate.proto.hashing import HashRoot, chunk_hashes
from kvgate.proto.ids import ChunkHash
from kvgate.sim.trace import TraceRequest

VOCAB_SIZE = 128_256  # Llama 3's vocabulary
SIM_ROOT = HashRoot(secret=b"", model_id="kvgate-sim")

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MUL1 = np.uint64(0xBF58476D1CE4E5B9)
_MUL2 = np.uint64(0x94D049BB133111EB)


def _splitmix64(x: np.ndarray) -> np.ndarray:
    """The splitmix64 finaliser, element-wise on uint64 (wrapping arithmetic is intended)."""
    x = x + _GOLDEN
    x = (x ^ (x >> np.uint64(30))) * _MUL1
    x = (x ^ (x >> np.uint64(27))) * _MUL2
    return x ^ (x >> np.uint64(31))


def prompt_tokens(request: TraceRequest, block_tokens: int, vocab: int = VOCAB_SIZE) -> np.ndarray:
    """The request's ``input_length`` token ids as a little-endian uint32 array (pure).

    Block ``i`` covers tokens ``[i*block_tokens, (i+1)*block_tokens)``; the last block is cut short.
    """
    positions = np.arange(request.input_length, dtype=np.uint64)
    block_keys = _splitmix64(np.asarray(request.hash_ids, dtype=np.uint64))
    keys = block_keys[positions // np.uint64(block_tokens)] + positions % np.uint64(block_tokens)
    return (_splitmix64(keys) % np.uint64(vocab)).astype("<u4")


def request_hashes(
    requests: Sequence[TraceRequest],
    block_tokens: int,
    chunk_size: int,
    root: HashRoot = SIM_ROOT,
) -> list[list[ChunkHash]]:
    """Per request, the chained hashes of its full chunks, exactly as the gateway computes them."""
    digest = root.digest()
    return [chunk_hashes(prompt_tokens(r, block_tokens), digest, chunk_size) for r in requests]
