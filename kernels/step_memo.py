"""``StepMemo``: values worked out once per step and shared by its layers.

Every layer of a step attends through the same metadata tensors; only the pools differ. A memo keys the
step by the identity and version of those tensors (weak references: a later step's new tensors never
match a dead one's values, even at the same address), and a call with other tensors, or with the same
tensors modified in place, starts afresh.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

import torch

V = TypeVar("V")


class StepMemo(Generic[V]):
    """The values of the step in progress, per key (e.g. a window, a sequence's shape)."""

    def __init__(self) -> None:
        self._versions: tuple[int | None, ...] = ()
        self._refs: tuple[weakref.ref[torch.Tensor], ...] = ()
        self._values: dict[Hashable, V] = {}

    def get(self, step: tuple[torch.Tensor, ...], key: Hashable, build: Callable[[], V]) -> V:
        """The value of ``key`` for the step of the metadata tensors ``step``, built by ``build`` on the
        step's first call for that key."""
        versions = tuple(tensor_version(t) for t in step)
        if versions != self._versions or not self._holds(step):
            self._versions, self._refs, self._values = versions, tuple(weakref.ref(t) for t in step), {}
        if key not in self._values:
            self._values[key] = build()
        return self._values[key]

    def _holds(self, step: tuple[torch.Tensor, ...]) -> bool:
        return len(self._refs) == len(step) and all(r() is t for r, t in zip(self._refs, step, strict=True))


def tensor_version(tensor: torch.Tensor) -> int | None:
    """The tensor's in-place modification count; None for an inference tensor, which keeps none (it
    is matched by identity alone)."""
    return None if tensor.is_inference() else tensor._version
