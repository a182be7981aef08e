"""Products followed by one elementwise step, fused into the product where the machine can.

A prefill-sized product ``x @ W^T`` (more than :data:`~kvgate.workers.model.gemm.MAX_SKINNY_ROWS` rows)
writes a ``[T, out]`` tensor that the next elementwise step (an activation, the gate's product, the
residual) reads and writes again; on the CPU in bf16 / fp16 these passes over memory cost about a
third as much as the layer's products. oneDNN's matmul applies such a step to each output tile while it is
still in cache ("post-ops", torch's ``mkldnn._linear_pointwise``), in fp32, rounding once. Each function
here computes

    act(x W^T + b)        :func:`fused_act`
    (x W^T + b) * other   :func:`fused_mul`
    (x W^T + b) + other   :func:`fused_add` (:func:`project_add` for a ``Projection``)

in one oneDNN call (a new ``[T, out]`` tensor); the callers take these forms where :func:`fuses` says
they pay (bf16 / fp16 on a CPU whose oneDNN runs them natively, prefill-sized inputs) and the product
then the step elsewhere. The two forms differ by the roundings the fused one skips (at most an ulp of
the output's dtype per skipped step). fp32 products stay unfused: oneDNN's fp32 matmul was no faster
than torch's own on the benchmark machine (a feed-forward layer at 2,048 rows: 69.5 against 63.7 ms),
and fp32 outputs stay bit-identical to the unfused engine's.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import torch
from torch.nn.functional import silu

from kvgate.workers.model.config import Activation
from kvgate.workers.model.gemm import MAX_SKINNY_ROWS, Projection

ACTIVATIONS: dict[Activation, Callable[[torch.Tensor], torch.Tensor]] = {  # in place: mutate their input
    "silu": partial(silu, inplace=True),  # SwiGLU
    "gelu_tanh": partial(torch.ops.aten.gelu_, approximate="tanh"),  # GeGLU (Gemma)
}

# The activations oneDNN applies as a post-op: (its name, its algorithm), per ``Activation``.
_POST_OPS: dict[Activation, tuple[str, str]] = {"silu": ("swish", ""), "gelu_tanh": ("gelu", "tanh")}


def _supported() -> dict[torch.dtype, bool]:
    """The dtypes whose oneDNN products this torch build and CPU run natively (none without oneDNN)."""
    ops = torch.ops.mkldnn
    if not (torch.backends.mkldnn.is_available() and hasattr(ops, "_linear_pointwise")):
        return {}
    return {
        torch.bfloat16: bool(ops._is_mkldnn_bf16_supported()),
        torch.float16: bool(ops._is_mkldnn_fp16_supported()),
    }


FUSED_DTYPES = frozenset(dtype for dtype, native in _supported().items() if native)


def fuses(x: torch.Tensor, weight: torch.Tensor) -> bool:
    """Whether ``x @ weight^T``'s epilogue is fused: both on the CPU in one of :data:`FUSED_DTYPES`, and
    ``x`` 2-D with more than ``MAX_SKINNY_ROWS`` rows (fewer: the decode forms of ``GemmPlan``)."""
    return (
        x.dim() == 2
        and x.shape[0] > MAX_SKINNY_ROWS
        and x.device.type == "cpu"
        and x.dtype in FUSED_DTYPES
        and weight.dtype == x.dtype
    )


def fused_act(
    x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, act: Activation
) -> torch.Tensor:
    """``act(x @ weight^T + bias)`` for x ``[T, in]`` -> ``[T, out]``, the activation fused (oneDNN:
    fp32 on any CPU, bf16 / fp16 where :data:`FUSED_DTYPES` has them, else a RuntimeError; faster
    than the unfused form where :func:`fuses`)."""
    name, algorithm = _POST_OPS[act]
    return torch.ops.mkldnn._linear_pointwise(x, weight, bias, name, [], algorithm)


def fused_mul(
    x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, other: torch.Tensor
) -> torch.Tensor:
    """``(x @ weight^T + bias) * other`` for x ``[T, in]``, other ``[T, out]`` -> ``[T, out]``, fused."""
    return torch.ops.mkldnn._linear_pointwise.binary(x, other, weight, bias, "mul")


def fused_add(
    x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, other: torch.Tensor
) -> torch.Tensor:
    """``(x @ weight^T + bias) + other`` for x ``[T, in]``, other ``[T, out]`` -> ``[T, out]``, fused."""
    return torch.ops.mkldnn._linear_pointwise.binary(x, other, weight, bias, "add")


def project_add(projection: Projection, x: torch.Tensor, other: torch.Tensor) -> torch.Tensor:
    """``projection(x) + other`` (a new tensor): the add fused into the product where :func:`fuses`,
    else after the product that ``projection``'s ``GemmPlan`` picks."""
    if fuses(x, projection.weight):
        return fused_add(x, projection.weight, projection.bias, other)
    return projection(x).add_(other)
