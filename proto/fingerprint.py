"""Config fingerprint: what gateway and workers must agree on for chunk hashes to match.

A worker advertises its fingerprint when it registers; the gateway refuses a worker whose fingerprint
differs from its own, instead of silently routing with a hit rate of zero.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass

import xxhash

from kvgate.proto.hashing import DEFAULT_CHUNK_SIZE, HashRoot

DEFAULT_BLOCK_SIZE = 16
_FINGERPRINT_VERSION = 1


@dataclass(frozen=True, slots=True)
class CacheConfig:
    """Deployment-wide cache layout. Validated on construction; immutable.

    ``chunk_size`` tokens per routed chunk; ``block_size`` tokens per KV block of the engine
    (``chunk_size`` must be a multiple of it); ``secret`` seeds every chunk hash of the deployment.
    """

    model_id: str
    secret: bytes = b""
    chunk_size: int = DEFAULT_CHUNK_SIZE
    block_size: int = DEFAULT_BLOCK_SIZE

    def __post_init__(self) -> None:
        if not self.model_id:
            raise ValueError("model_id must not be empty")
        if self.block_size <= 0 or self.chunk_size <= 0:
            raise ValueError("chunk_size and block_size must be positive")
        if self.chunk_size % self.block_size:
            raise ValueError(
                f"chunk_size ({self.chunk_size}) must be a multiple of block_size ({self.block_size})"
            )

    def root(self, adapter_id: str = "", cache_salt: str = "") -> HashRoot:
        """The hash root of one request of this deployment."""
        return HashRoot(self.secret, self.model_id, adapter_id, cache_salt)

    def fingerprint(self) -> str:
        """32 hex chars; equal iff version, model id, chunk size, block size and secret are equal.

        The secret enters only through its own digest, so the fingerprint can be logged and
        exchanged in the clear.
        """
        fields = asdict(self) | {
            "secret": xxhash.xxh3_128_hexdigest(self.secret),
            "version": _FINGERPRINT_VERSION,
        }
        return xxhash.xxh3_128_hexdigest(json.dumps(fields, sort_keys=True).encode())
