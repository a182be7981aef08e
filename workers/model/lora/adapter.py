"""``LoraAdapter``: one adapter's low-rank updates, per layer and per linear module of the decoder.

A LoRA update turns a linear layer ``y = x W^T`` into ``y = x W^T + s * (x A^T) B^T`` with ``A [r, in]``,
``B [out, r]`` and the scale ``s = alpha / r`` (``alpha / sqrt(r)`` with rsLoRA). kvgate fuses some
linear layers (``attn.qkv`` = q, k, v rows; ``mlp.gate_up`` = gate, up rows), so an adapter's updates
of the shards of one fused layer are fused too: their ``A`` stacked (``[r_q + r_k + r_v, in]``) and their
``B`` placed block-diagonally (``B_q`` in the q rows and the q columns of the stack, and so on; zeros
elsewhere). ``x A^T B^T`` then equals each shard's update in its own rows, and a shard the adapter does
not train contributes nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

# The linear modules of a decoder layer a LoRA update can target (module path inside the layer).
LORA_MODULES = ("attn.qkv", "attn.o", "mlp.gate_up", "mlp.down")


@dataclass(frozen=True, slots=True)
class LoraPair:
    """The update of one linear module: ``y += scale * (x @ a.T) @ b.T``; ``a [r, in]``, ``b [out, r]``."""

    a: torch.Tensor
    b: torch.Tensor
    scale: float

    def add_to(self, x: torch.Tensor, y: torch.Tensor) -> None:
        """Adds the update of the rows ``x [n, in]`` to ``y [n, out]`` in place."""
        y.add_((x @ self.a.T) @ self.b.T, alpha=self.scale)


@dataclass(frozen=True, slots=True)
class LoraAdapter:
    """A loaded adapter: ``name`` (the adapter id requests name, part of their cache hash root),
    its ``rank`` (the largest of its modules'), and its updates keyed by (layer, module path)."""

    name: str
    rank: int
    pairs: dict[tuple[int, str], LoraPair]

    def pair(self, layer: int, module: str) -> LoraPair | None:
        """The update of ``module`` in ``layer``; None when the adapter leaves it alone."""
        return self.pairs.get((layer, module))

    def to(self, device: torch.device | str, dtype: torch.dtype) -> LoraAdapter:
        """A copy with every tensor on ``device`` in ``dtype``."""
        moved = {
            key: LoraPair(p.a.to(device, dtype), p.b.to(device, dtype), p.scale)
            for key, p in self.pairs.items()
        }
        return LoraAdapter(self.name, self.rank, moved)


def fuse_shards(
    shards: dict[str | None, tuple[torch.Tensor, torch.Tensor]],
    rows: dict[str | None, tuple[int, int]],
    out: int,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The fused ``(A, B)`` of a module from its shards' ``(A [r, in], B [rows, r])``: ``rows[shard]``
    is ``(first row, row count)`` of the shard in the fused output of ``out`` rows (``None``: the whole
    module, not fused). Raises ValueError when a shard's B does not have its row count."""
    names = [name for name in rows if name in shards]
    a = torch.cat([shards[name][0] for name in names])  # [sum r, in]
    b = torch.zeros(out, a.shape[0], dtype=a.dtype)
    col = 0
    for name in names:
        first, count = rows[name]
        shard_b = shards[name][1]
        if shard_b.shape[0] != count:
            raise ValueError(
                f"LoRA B of {name or 'the module'} has {shard_b.shape[0]} rows, expected {count}"
            )
        b[first : first + count, col : col + shard_b.shape[1]] = shard_b
        col += shard_b.shape[1]
    return a, b
