"""KV element types: what one cached K or V element costs, quantised or not.

A KV block of the engine is, per layer and for K and for V, ``[block_size, num_kv_heads, head_dim]``
elements (:class:`kvgate.proto.layout.KVGeometry`). Float types store the elements as they are. The
quantised types (``int8``, ``fp8`` = e4m3) store one byte per element plus one scale per block, layer,
K/V and KV head: ``SCALE_DTYPE`` (float32, ``SCALE_BYTES`` = 4 bytes), so a block costs

    2 x layers x KV heads x (block_size x head_dim x element bytes + scale bytes)

and a token ``block bytes / block_size``. With the default 16-token blocks and head dim 128 the scales
add 4 / 2048 = 0.2 % to an int8 block. The planner (``kvgate plan``) and the engine (``--kv-memory``)
size memory with this one rule.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # layout imports this module: the geometry is only a type here
    from kvgate.proto.layout import KVGeometry

SCALE_DTYPE = "float32"
SCALE_BYTES = 4
AUTO = "auto"
"""Not a type: "the model's compute dtype", resolved by whoever knows it (:func:`resolve_kv_dtype`)."""


@dataclass(frozen=True, slots=True)
class KVDtype:
    """One KV element type. ``name``: its command-line spelling (``"bf16"``); ``storage``: the torch
    dtype name of the stored elements; ``scaled``: one ``SCALE_DTYPE`` scale per block, layer, K/V and
    KV head is stored next to the elements."""

    name: str
    storage: str
    element_bytes: int
    scaled: bool = False

    @property
    def scale_bytes(self) -> int:
        """Bytes of the scale of one (block, layer, K or V, KV head); 0 for a float type."""
        return SCALE_BYTES if self.scaled else 0


KV_DTYPES: dict[str, KVDtype] = {
    d.name: d
    for d in (
        KVDtype("fp32", "float32", 4),
        KVDtype("bf16", "bfloat16", 2),
        KVDtype("fp16", "float16", 2),
        KVDtype("int8", "int8", 1, scaled=True),
        KVDtype("fp8", "float8_e4m3fn", 1, scaled=True),
    )
}
_BY_STORAGE = {d.storage: d for d in KV_DTYPES.values()}


def kv_dtype(name: str) -> KVDtype:
    """The KV type called ``name`` (a command-line spelling or a torch dtype name: ``"bf16"`` or
    ``"bfloat16"``); ValueError listing the known ones."""
    found = KV_DTYPES.get(name) or _BY_STORAGE.get(name)
    if found is None:
        raise ValueError(f"unknown KV dtype {name!r}; known: {', '.join(KV_DTYPES)} (or {AUTO})")
    return found


def check_kv_dtype_name(name: str) -> str:
    """``name`` itself when it is a command-line spelling of :data:`KV_DTYPES` or ``auto``; ValueError
    listing the known ones otherwise."""
    if name != AUTO and name not in KV_DTYPES:
        raise ValueError(f"unknown KV dtype {name!r}; known: {AUTO}, {', '.join(KV_DTYPES)}")
    return name


def storage_bytes(storage: str) -> int:
    """Bytes of one stored element of the torch dtype called ``storage``; ValueError for a type that is
    no KV storage type."""
    found = _BY_STORAGE.get(storage)
    if found is None:
        raise ValueError(f"KV storage dtype {storage!r} is not one of {sorted(_BY_STORAGE)}")
    return found.element_bytes


def resolve_kv_dtype(name: str, compute_dtype: str) -> KVDtype:
    """``name``'s type, ``compute_dtype``'s for ``auto``."""
    return kv_dtype(compute_dtype if name == AUTO else name)


def kv_block_bytes(geometry: KVGeometry, dtype: KVDtype, block_size: int) -> int:
    """Bytes of one ``block_size``-token block over every layer, K and V, scales included, with the
    elements stored as ``dtype`` (``geometry.dtype`` is not used: only its shape). Pure."""
    per_head = block_size * geometry.head_dim * dtype.element_bytes + dtype.scale_bytes
    return 2 * geometry.num_layers * geometry.num_kv_heads * per_head
