"""Chained 128-bit XXH3 hashes of full token chunks: the byte-for-byte contract of kvgate.

Layout (version 1); all integers little-endian:

- **Root.** ``root = XXH3_128(b"kvgate/chunk/v1" || field(secret) || field(model_id) || field(adapter_id)
  || field(cache_salt) [|| field(kv_dtype)], seed=0)`` where ``field(x) = u32(len(x)) || x`` and strings
  are UTF-8. A missing adapter or salt is the empty field; the KV dtype field is present only when the
  layout names a KV dtype (``int8``, ``bf16``, ...; absent for ``auto``, so roots without one are the
  same as before KV dtypes existed). The length prefixes make the fields unambiguous.
- **Chunk i** (tokens ``ids[i*C:(i+1)*C]``, ``C = chunk_size``):
  ``h_i = XXH3_128(h_{i-1} || u32le(ids[i*C]) || ... || u32le(ids[(i+1)*C-1]), seed=0)``, with
  ``h_{-1} = root``; digests are the 16 bytes of ``XXH3_128(...).digest()`` (big-endian, as xxhash emits).
- Only full chunks are hashed: ``len(ids) // C`` hashes; a trailing partial chunk has none.

So equal ``h_i`` means equal root inputs and equal tokens ``ids[:(i+1)*C]``, up to 2^-128 collisions
(and workers verify token ids anyway, so a collision costs a miss, never wrong output).
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import xxhash

from kvgate.proto.ids import ChunkHash

_ROOT_TAG = b"kvgate/chunk/v1"
_MAX_TOKEN_ID = 2**32 - 1

TokenIds = np.ndarray | Sequence[int]


@dataclass(frozen=True, slots=True)
class HashRoot:
    """The inputs of the root seed. ``secret`` and ``kv_dtype`` (``""``: none named) are per deployment;
    the rest vary per request."""

    secret: bytes
    model_id: str
    adapter_id: str = ""
    cache_salt: str = ""
    kv_dtype: str = ""

    def digest(self) -> ChunkHash:
        """The 16-byte root ``h_{-1}``; pure, deterministic across processes and platforms."""
        fields = [self.secret, self.model_id.encode(), self.adapter_id.encode(), self.cache_salt.encode()]
        if self.kv_dtype:
            fields.append(self.kv_dtype.encode())
        body = b"".join(struct.pack("<I", len(f)) + f for f in fields)
        return ChunkHash(xxhash.xxh3_128_digest(_ROOT_TAG + body))


def as_token_array(token_ids: TokenIds) -> np.ndarray:
    """Token ids as a contiguous little-endian uint32 array (no copy when already one).

    Raises ValueError for ids outside [0, 2**32) or a non-1-D input, never wraps silently.
    """
    if isinstance(token_ids, np.ndarray) and token_ids.dtype == np.dtype("<u4"):
        arr = token_ids
    else:
        arr = _checked_array(token_ids)
    if arr.ndim != 1:
        raise ValueError(f"token ids must be 1-D, got shape {arr.shape}")
    return np.ascontiguousarray(arr)


def _checked_array(token_ids: TokenIds) -> np.ndarray:
    raw = np.asarray(token_ids)
    if raw.size == 0:
        return np.zeros(0, dtype="<u4")
    if raw.dtype.kind not in "iu":
        raise ValueError(f"token ids must be integers, got dtype {raw.dtype}")
    if int(raw.min()) < 0 or int(raw.max()) > _MAX_TOKEN_ID:
        raise ValueError("token ids must lie in [0, 2**32)")
    return raw.astype("<u4")


def chunk_hashes(token_ids: TokenIds, root: ChunkHash, chunk_size: int) -> list[ChunkHash]:
    """Hashes of every full ``chunk_size``-token chunk of ``token_ids``, chained from ``root``.

    Pure; the result for a prefix of the tokens is a prefix of the result. ``chunk_size`` must be
    positive. Fastest with a uint32 numpy array (no conversion).
    """
    if chunk_size <= 0:
        raise ValueError(f"chunk_size must be positive, got {chunk_size}")
    data = memoryview(as_token_array(token_ids)).cast("B")
    step = 4 * chunk_size
    hashes: list[ChunkHash] = []
    parent = bytes(root)
    for start in range(0, len(data) - step + 1, step):
        h = xxhash.xxh3_128(parent)
        h.update(data[start : start + step])
        parent = h.digest()
        hashes.append(ChunkHash(parent))
    return hashes
