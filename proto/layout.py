"""The cache layout: every rule that gateway, workers, kernels and simulator must share, in one object.

Gateway and workers must agree on these byte for byte or the hit rate silently drops to zero, so each
rule is written here once and nowhere else:

- **Sizes.** ``chunk_size`` tokens per routed (hashed, indexed) chunk, 128 by default; ``block_size``
  tokens per KV block of the engine, 16 by default; a chunk is a whole number of blocks.
- **Salt -> root.** A request's chain starts from ``HashRoot(secret, model_id, adapter_id, salt)``;
  a shared namespace covers whole chunks only (:meth:`CacheLayout.roots`).
- **Reusable tokens.** A worker reuses whole blocks before the last prompt token: that token is always
  recomputed, because its logits start the decode (:meth:`CacheLayout.reusable_tokens`).
- **TTL classes.** A cached block lives ``DEFAULT_TTL_S`` (5 minutes) after its last use; a request may
  pin a prefix for a named class, ``"5m"`` or ``"1h"`` (:data:`TTL_CLASSES`).
- **KV geometry.** Layers, KV heads, head dim and element type of the model's KV cache
  (:class:`KVGeometry`): known where the weights are (workers, kernels, simulator), absent on the
  gateway, which never loads a model.
- **KV dtype.** How the engine stores K and V (``kv_dtype``: ``auto`` = the model's compute dtype, or a
  name of :data:`kvgate.proto.kv_dtype.KV_DTYPES`, e.g. ``int8``). An explicit KV dtype is folded into
  the hash root and the fingerprint, so workers storing different KV types never share cache entries;
  ``auto`` leaves both exactly as they were before KV dtypes existed.
- **Fingerprint.** The fields above that change hashes, digested: a worker whose fingerprint differs
  is refused instead of routed to with a hit rate of zero.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace

import xxhash

from kvgate.proto.chain import ChainRoots
from kvgate.proto.hashing import HashRoot
from kvgate.proto.kv_dtype import AUTO, check_kv_dtype_name, storage_bytes
from kvgate.proto.units import TokenCount

DEFAULT_CHUNK_SIZE = 128
DEFAULT_BLOCK_SIZE = 16
TTL_CLASSES: dict[str, int] = {"5m": 300, "1h": 3600}
"""Named TTL classes a request may pin a prefix for (Anthropic's ``cache_control`` TTLs), in seconds."""
DEFAULT_TTL_S = float(TTL_CLASSES["5m"])
"""Seconds a cached block lives after its last use when nothing pins it, in every tier."""
_FINGERPRINT_VERSION = 2


def reusable_tokens(prompt_tokens: int, block_size: int) -> TokenCount:
    """The most tokens of a ``prompt_tokens``-token prompt a worker can take from cache: whole blocks
    before the last prompt token (0 for 0 or 1 tokens). Pure."""
    return TokenCount(max(prompt_tokens - 1, 0) // block_size * block_size)


@dataclass(frozen=True, slots=True)
class KVGeometry:
    """The shape of one token's KV entries: ``num_layers`` x (K, V) x ``num_kv_heads`` x ``head_dim``
    elements of ``dtype`` (a torch dtype's name, e.g. ``"bfloat16"``, or a quantised storage type,
    ``"int8"`` / ``"float8_e4m3fn"``: the contract stays torch-free). A KV block of the engine is
    ``[block_size, num_kv_heads, head_dim]`` per layer, for K and for V. ``bytes_per_token`` counts the
    elements only: a quantised block's scales are counted by :func:`kvgate.proto.kv_dtype.kv_block_bytes`."""

    num_layers: int
    num_kv_heads: int
    head_dim: int
    dtype: str = "float32"

    def __post_init__(self) -> None:
        if min(self.num_layers, self.num_kv_heads, self.head_dim) <= 0:
            raise ValueError(f"KV geometry sizes must be positive, got {self}")
        storage_bytes(self.dtype)  # ValueError for an unknown type

    @property
    def element_bytes(self) -> int:
        return storage_bytes(self.dtype)

    @property
    def bytes_per_token(self) -> int:
        """K and V of every layer: 2 x layers x KV heads x head dim x bytes per element."""
        return 2 * self.num_layers * self.num_kv_heads * self.head_dim * self.element_bytes

    def block_shape(self, block_size: int) -> tuple[int, int, int]:
        """One layer's K (or V) block: ``(block_size, num_kv_heads, head_dim)``."""
        return (block_size, self.num_kv_heads, self.head_dim)


@dataclass(frozen=True, slots=True)
class CacheLayout:
    """Deployment-wide cache layout. Validated on construction; immutable.

    ``model_id`` and ``secret`` (per deployment) seed every chunk hash; ``chunk_size`` is a multiple of
    ``block_size``; ``kv_dtype`` is how workers store K and V (``auto`` or a KV dtype name, see the
    module docstring); ``kv`` is the model's KV geometry where it is known (a worker, once it has loaded
    the model: :meth:`with_kv`), None on the gateway.
    """

    model_id: str
    secret: bytes = b""
    chunk_size: int = DEFAULT_CHUNK_SIZE
    block_size: int = DEFAULT_BLOCK_SIZE
    kv: KVGeometry | None = None
    kv_dtype: str = AUTO

    def __post_init__(self) -> None:
        check_kv_dtype_name(self.kv_dtype)
        if not self.model_id:
            raise ValueError("model_id must not be empty")
        if self.block_size <= 0 or self.chunk_size <= 0:
            raise ValueError("chunk_size and block_size must be positive")
        if self.chunk_size % self.block_size:
            raise ValueError(
                f"chunk_size ({self.chunk_size}) must be a multiple of block_size ({self.block_size})"
            )

    def with_kv(self, kv: KVGeometry) -> CacheLayout:
        """This layout with the model's KV geometry (the fingerprint is unchanged)."""
        return replace(self, kv=kv)

    def root(self, adapter_id: str = "", cache_salt: str = "") -> HashRoot:
        """The hash root of one namespace (``cache_salt``) of this deployment."""
        return HashRoot(self.secret, self.model_id, adapter_id, cache_salt, self._explicit_kv_dtype())

    def roots(
        self, private_salt: str, shared_salt: str = "", shared_tokens: int = 0, adapter_id: str = ""
    ) -> ChainRoots:
        """The chain of a request: its own namespace's root, after a shared namespace's root for the
        first ``shared_tokens`` tokens (0: none). Raises ValueError unless ``shared_tokens`` is a
        whole number of chunks."""
        private = self.root(adapter_id, private_salt).digest()
        if not shared_tokens:
            return ChainRoots(private)
        roots = ChainRoots(private, self.root(adapter_id, shared_salt).digest(), shared_tokens)
        roots.check(self.chunk_size)
        return roots

    def whole_chunks(self, tokens: int) -> TokenCount:
        """``tokens`` rounded down to whole chunks (what a shared namespace can cover)."""
        return TokenCount(tokens // self.chunk_size * self.chunk_size)

    def fingerprint(self) -> str:
        """32 hex chars; equal iff version, model id, chunk size, block size, KV dtype and whether there
        is a secret are equal (``auto``, the default KV dtype, is left out of the digest, so a
        deployment that names none keeps the fingerprint it had before KV dtypes existed).

        The fingerprint reveals nothing of the secret but its presence, so it can be logged and
        exchanged in the clear; two deployments with different secrets tell each other apart by the
        signatures of their worker records (:mod:`kvgate.proto.trust`). The KV geometry does not change
        hashes, so it stays out.
        """
        fields = {
            "model_id": self.model_id,
            "keyed": bool(self.secret),
            "chunk_size": self.chunk_size,
            "block_size": self.block_size,
            "version": _FINGERPRINT_VERSION,
        }
        if self._explicit_kv_dtype():
            fields["kv_dtype"] = self.kv_dtype
        return xxhash.xxh3_128_hexdigest(json.dumps(fields, sort_keys=True).encode())

    def _explicit_kv_dtype(self) -> str:
        """The KV dtype when one is named, "" for ``auto`` (which changes no hash)."""
        return "" if self.kv_dtype == AUTO else self.kv_dtype
