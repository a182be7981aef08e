"""How a projection multiplies a few rows by its weight: the same product, computed the way this
machine does fastest for decode-sized inputs.

``x @ W^T`` for ``x`` of a few rows (a decode step's batch) is bound by streaming ``W`` from memory, and
CPU BLAS libraries stream it at very different speeds depending on which operand they see as the large
one: on Intel CPUs with bf16 weights, ``(W @ x^T)^T`` is 20-40% faster than ``linear(x, W)`` at 2-64
rows, and for one row a matrix-vector product (``mv``) streams the weight at memory speed where the
matrix forms run 25-45% slower; for fp32 the best form depends on the shape. A :class:`GemmPlan` says,
per weight shape and row bucket, which :data:`GEMMS` entry to use (``mv`` only for one row);
:mod:`kvgate.workers.model.gemm_tuning` measures it on the model's own weights. Every entry computes
the same product (up to the order of fp32 accumulation); inputs of more than :data:`MAX_SKINNY_ROWS`
rows (prefill) always take ``linear``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import torch
from torch import nn
from torch.nn.functional import linear

MAX_SKINNY_ROWS = 64
BUCKETS = (1, 8, 32)  # the row counts measured (see bucket_of)

Gemm = Callable[[torch.Tensor, torch.Tensor, torch.Tensor | None], torch.Tensor]


def _transposed(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    """``(W @ x^T)^T``, contiguous: the weight as the left operand."""
    out = torch.mm(weight, x.t()).t().contiguous()
    return out if bias is None else out.add_(bias)


def _onednn(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    """oneDNN's matmul (torch's ``mkldnn`` linear), without prepacked weights."""
    return torch.ops.mkldnn._linear_pointwise(x, weight, bias, "none", [], "")


def _mv(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    """``W @ x[0]`` as one row: a matrix-vector product (one row of ``x`` only, see :data:`MAX_ROWS`)."""
    if x.shape[0] != 1:
        raise ValueError(f"mv takes one row, got {x.shape[0]}")
    out = torch.mv(weight, x[0])[None]
    return out if bias is None else out.add_(bias)


def _has_onednn() -> bool:
    return torch.backends.mkldnn.is_available() and hasattr(torch.ops.mkldnn, "_linear_pointwise")


GEMMS: dict[str, Gemm] = {"linear": linear, "transposed": _transposed, "mv": _mv}
if _has_onednn():
    GEMMS["onednn"] = _onednn
MAX_ROWS: dict[str, int] = {"mv": 1}  # forms that take at most this many rows (the rest: any number)

GEMM_CHOICES = ("auto", *sorted(GEMMS))  # auto: measured at load (see gemm_tuning)

Shape = tuple[int, int]  # a weight's (out_features, in_features)


def fits(name: str, bucket: int) -> bool:
    """Whether form ``name`` computes products of the rows of ``bucket`` (see :func:`bucket_of`)."""
    return bucket <= MAX_ROWS.get(name, MAX_SKINNY_ROWS)


def bucket_of(rows: int) -> int:
    """The measured bucket a product of ``rows`` rows (1..MAX_SKINNY_ROWS) runs as: 1, 8 (2-31) or 32."""
    if rows == 1:
        return 1
    return 32 if rows >= 32 else 8


@dataclass(frozen=True)
class GemmPlan:
    """Which entry of :data:`GEMMS` each (weight shape, row bucket) uses; anything not listed (and
    every input of more than :data:`MAX_SKINNY_ROWS` rows) uses ``linear``. Immutable."""

    choices: Mapping[tuple[Shape, int], str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        unknown = sorted({name for name in self.choices.values() if name not in GEMMS})
        if unknown:
            raise ValueError(f"unknown GEMM {unknown}: this torch build has {sorted(GEMMS)}")
        misfits = sorted(f"{n}@{b}" for (_, b), n in self.choices.items() if not fits(n, b))
        if misfits:
            raise ValueError(f"GEMM forms planned for more rows than they take: {', '.join(misfits)}")

    @classmethod
    def uniform(cls, name: str, shapes: list[Shape]) -> GemmPlan:
        """``name`` for every bucket of every shape in ``shapes`` that it takes (the rest: ``linear``)."""
        return cls({(shape, b): name for shape in shapes for b in BUCKETS if fits(name, b)})

    def project(
        self, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None
    ) -> torch.Tensor:
        """``linear(x, weight, bias)`` for x ``[T, in]``, computed as planned; a new ``[T, out]`` tensor."""
        rows = x.shape[0]
        if x.dim() != 2 or rows == 0 or rows > MAX_SKINNY_ROWS or not self.choices:
            return linear(x, weight, bias)
        name = self.choices.get(((weight.shape[0], weight.shape[1]), bucket_of(rows)), "linear")
        return GEMMS[name](x, weight, bias)

    def describe(self) -> str:
        """One line: the non-``linear`` choices, for the start-up log."""
        chosen = sorted(self.choices.items())
        picked = [f"{o}x{i}@{b}:{name}" for ((o, i), b), name in chosen if name != "linear"]
        return ", ".join(picked) or "linear everywhere"


STANDARD = GemmPlan()


class Projection(nn.Linear):
    """``nn.Linear`` whose product follows the model's :class:`GemmPlan` (``STANDARD`` until one is
    installed by :func:`kvgate.workers.model.gemm_tuning.install`)."""

    plan: GemmPlan = STANDARD

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x ``[T, in]`` -> ``[T, out]``."""
        return self.plan.project(x, self.weight, self.bias)
