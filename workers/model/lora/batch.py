"""``LoraBatch``: which rows of one step's flat batch run under which adapter.

A step mixes sequences of different adapters (and of none). Their rows are grouped by adapter; each
adapted linear module adds, for each group, the group's update to the group's rows only:
``y[rows] += s * (x[rows] A^T) B^T``. Rows of sequences without an adapter are left as the base model
computed them, so a batch without adapters costs nothing more.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from kvgate.workers.model.lora.adapter import LoraAdapter


@dataclass(frozen=True, slots=True)
class LoraGroup:
    """The rows of the flat batch (int64 ``[n]``, on the model's device) that run under ``adapter``;
    ``rows`` None: every row of the batch."""

    adapter: LoraAdapter
    rows: torch.Tensor | None


@dataclass(frozen=True, slots=True)
class LayerLora:
    """The groups of a step, seen from one decoder layer."""

    layer: int
    groups: tuple[LoraGroup, ...]

    def add(self, module: str, x: torch.Tensor, y: torch.Tensor) -> None:
        """Adds each group's update of ``module`` to its rows: ``x [T, in]`` the module's input, ``y [T,
        out]`` its output, mutated in place."""
        for group in self.groups:
            pair = group.adapter.pair(self.layer, module)
            if pair is None:
                continue
            if group.rows is None:
                pair.add_to(x, y)
            else:
                update = torch.zeros(len(group.rows), y.shape[1], dtype=y.dtype, device=y.device)
                pair.add_to(x.index_select(0, group.rows), update)
                y.index_add_(0, group.rows, update)


@dataclass(frozen=True, slots=True)
class LoraBatch:
    """The adapter groups of one step; immutable. ``at(layer)`` is what a layer's modules apply."""

    groups: tuple[LoraGroup, ...]

    @staticmethod
    def build(
        spans: Sequence[tuple[LoraAdapter | None, int]], device: torch.device | str
    ) -> LoraBatch | None:
        """From each sequence's ``(adapter or None, rows)`` in batch order (its rows follow the
        previous sequence's); None when no sequence has an adapter."""
        rows: dict[str, list[int]] = {}
        adapters: dict[str, LoraAdapter] = {}
        first = 0
        for adapter, count in spans:
            if adapter is not None:
                adapters[adapter.name] = adapter
                rows.setdefault(adapter.name, []).extend(range(first, first + count))
            first += count
        if not adapters:
            return None
        whole = len(adapters) == 1 and all(adapter is not None for adapter, _ in spans)
        groups = tuple(
            LoraGroup(adapters[name], None if whole else torch.tensor(ids, dtype=torch.int64, device=device))
            for name, ids in rows.items()
        )
        return LoraBatch(groups)

    def at(self, layer: int) -> LayerLora:
        return LayerLora(layer, self.groups)
