"""Paged-attention kernels: KV-cache write, prefill (with cached prefix) and decode attention, block copy.

``get_kernels("reference")`` is the plain-torch specification; ``get_kernels("sdpa")`` the fast path off
the GPU (torch's fused attention over the paged cache); ``get_kernels("triton")`` the GPU path. Cache
layout and shape checks: ``geometry``; the interface: ``protocol.AttentionKernels``.
"""

from kvgate.kernels.geometry import CacheGeometry, cache_geometry, pool_dtype, pool_shape
from kvgate.kernels.protocol import AttentionKernels
from kvgate.kernels.reference import ReferenceKernels
from kvgate.kernels.registry import get_kernels, kernel_names
from kvgate.kernels.sdpa import SdpaKernels

__all__ = [
    "AttentionKernels",
    "CacheGeometry",
    "ReferenceKernels",
    "SdpaKernels",
    "cache_geometry",
    "get_kernels",
    "kernel_names",
    "pool_dtype",
    "pool_shape",
]
