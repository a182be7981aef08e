"""Kernel backends by name. ``"reference"`` (plain torch, the specification) and ``"sdpa"`` (torch's fused
attention, the fast path off the GPU) always exist; ``"triton"`` needs the ``triton`` package and is
imported only when asked for, so ``kvgate.kernels`` imports without it."""

from __future__ import annotations

from collections.abc import Callable

from kvgate.kernels.protocol import AttentionKernels
from kvgate.kernels.reference import ReferenceKernels
from kvgate.kernels.sdpa import SdpaKernels


def _triton() -> AttentionKernels:
    try:
        from kvgate.kernels.triton_ops.backend import TritonKernels
    except ImportError as exc:
        raise ImportError(
            "kernel backend 'triton' needs the triton package: pip install 'kvgate[triton]'"
        ) from exc
    return TritonKernels()


_FACTORIES: dict[str, Callable[[], AttentionKernels]] = {
    "reference": ReferenceKernels,
    "sdpa": SdpaKernels,
    "triton": _triton,
}


def kernel_names() -> tuple[str, ...]:
    """Names ``get_kernels`` accepts."""
    return tuple(_FACTORIES)


def get_kernels(name: str) -> AttentionKernels:
    """A new backend instance; raises ``KeyError`` for an unknown name, ``ImportError`` when the backend's
    package is missing."""
    try:
        factory = _FACTORIES[name]
    except KeyError:
        raise KeyError(f"unknown kernel backend {name!r}; known: {', '.join(_FACTORIES)}") from None
    return factory()
