"""``EngineConfig``: one worker engine's settings. Validated on construction, never mutated."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from kvgate.kernels import kernel_names
from kvgate.proto.kv_dtype import KVDtype, resolve_kv_dtype
from kvgate.proto.layout import DEFAULT_TTL_S, CacheLayout
from kvgate.workers.kv import KVCacheConfig
from kvgate.workers.model.gemm import GEMM_CHOICES

DEFAULT_KERNEL_BACKEND = "sdpa"  # torch's fused attention: the fast path on any device

DTYPES: dict[str, torch.dtype] = {
    "float32": torch.float32,
    "bfloat16": torch.bfloat16,
    "float16": torch.float16,
}


@dataclass(frozen=True, slots=True)
class SchedulingLimits:
    """What one engine step may hold: at most ``max_num_seqs`` running sequences, at most
    ``max_tokens_per_step`` tokens computed in total (a decode counts 1), and at most
    ``max_prefill_tokens_per_step`` prompt tokens of any one sequence (longer prompts are prefilled in
    chunks over several steps; a chunk is also capped by what is left of the step's budget)."""

    max_num_seqs: int = 256
    max_tokens_per_step: int = 2048
    max_prefill_tokens_per_step: int = 2048

    def __post_init__(self) -> None:
        for name in ("max_num_seqs", "max_tokens_per_step", "max_prefill_tokens_per_step"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")


@dataclass(frozen=True, slots=True)
class EngineConfig:
    """One engine's settings.

    - ``cache``: the deployment's cache layout (model id, hash secret, chunk and block size, KV dtype).
      The engine hashes blocks and published chunks from it, so a worker advertises
      ``cache.fingerprint()``; its ``kv_dtype`` is how the pools store K and V (:attr:`kv_dtype`:
      ``auto`` = ``dtype``; ``int8`` / ``fp8`` quantise, see ``kvgate.kernels.quant``).
    - GPU tier (on ``device``): ``num_gpu_blocks`` blocks, or as many as fit in ``kv_memory_bytes``
      bytes (scales included), or in ``gpu_memory_fraction`` of the device memory free once the model
      is loaded (for the ``cpu`` device: of the host memory available). Exactly one of the three is set.
    - CPU tier (pinned memory when ``device`` is CUDA): ``num_cpu_blocks`` blocks, or as many as fit in
      ``cpu_kv_memory_bytes`` bytes (at most one of the two is set); 0 = no CPU tier (blocks evicted
      from the GPU are dropped).
    - ``limits``: continuous-batching limits (see :class:`SchedulingLimits`).
    - ``max_model_len``: most tokens (prompt + output) of one sequence; None = the model's context
      length, capped by the GPU tier's capacity (so one sequence always fits alone).
    - ``ttl_s``: default TTL of a cached block after its last use; ``cpu_ttl_s``: the least time a block
      offloaded to the CPU tier stays there.
    - ``kernel_backend``: a name of ``kvgate.kernels.kernel_names()`` (default ``sdpa``, torch's fused
      attention; ``reference`` is the slow specification, ``triton`` the GPU kernels).
    - ``device``: a torch device string (``cpu``, ``cuda``, ``cuda:1``); ``dtype``: ``float32``,
      ``bfloat16`` or ``float16``.
    - ``gemm``: how projections multiply decode-sized batches (``kvgate.workers.model.gemm``):
      ``auto`` measures the fastest form on the model's weights at load (CPU only); ``linear``
      (torch's ``linear`` everywhere: the same numerics on every run), ``transposed`` or ``onednn``.
    """

    cache: CacheLayout
    num_gpu_blocks: int | None = None
    gpu_memory_fraction: float | None = None
    num_cpu_blocks: int = 0
    kv_memory_bytes: int | None = None
    cpu_kv_memory_bytes: int | None = None
    limits: SchedulingLimits = field(default_factory=SchedulingLimits)
    max_model_len: int | None = None
    ttl_s: float = DEFAULT_TTL_S
    cpu_ttl_s: float = DEFAULT_TTL_S
    kernel_backend: str = DEFAULT_KERNEL_BACKEND
    device: str = "cpu"
    dtype: str = "float32"
    gemm: str = "auto"

    def __post_init__(self) -> None:
        self._check_gpu_tier()
        self._check_cpu_tier()
        if self.max_model_len is not None and self.max_model_len < 2:
            raise ValueError(
                f"max_model_len must be >= 2 (a prompt and a new token), got {self.max_model_len}"
            )
        if self.ttl_s < 0 or self.cpu_ttl_s < 0:
            raise ValueError("ttl_s and cpu_ttl_s must be >= 0")
        if self.kernel_backend not in kernel_names():
            raise ValueError(f"unknown kernel backend {self.kernel_backend!r}; known: {kernel_names()}")
        if self.dtype not in DTYPES:
            raise ValueError(f"dtype must be one of {sorted(DTYPES)}, got {self.dtype!r}")
        if self.gemm not in GEMM_CHOICES:
            raise ValueError(f"gemm must be one of {', '.join(GEMM_CHOICES)}, got {self.gemm!r}")
        try:
            torch.device(self.device)
        except RuntimeError as exc:
            raise ValueError(f"invalid device {self.device!r}: {exc}") from None
        kv = self.kv_dtype
        if not kv.scaled and kv.storage != self.dtype:
            raise ValueError(
                f"KV dtype {kv.name} with dtype {self.dtype}: a float KV dtype must be the compute dtype "
                "(use auto); only int8 and fp8 store K and V in another type"
            )

    def _check_gpu_tier(self) -> None:
        sizes = (self.num_gpu_blocks, self.kv_memory_bytes, self.gpu_memory_fraction)
        if sum(size is not None for size in sizes) != 1:
            raise ValueError("set exactly one of num_gpu_blocks, kv_memory_bytes and gpu_memory_fraction")
        if self.kv_memory_bytes is not None and self.kv_memory_bytes < 1:
            raise ValueError(f"kv_memory_bytes must be >= 1, got {self.kv_memory_bytes}")
        if self.num_gpu_blocks is not None and self.num_gpu_blocks < 1:
            raise ValueError(f"num_gpu_blocks must be >= 1, got {self.num_gpu_blocks}")
        if self.gpu_memory_fraction is not None and not 0 < self.gpu_memory_fraction <= 1:
            raise ValueError(f"gpu_memory_fraction must lie in (0, 1], got {self.gpu_memory_fraction}")

    def _check_cpu_tier(self) -> None:
        if self.num_cpu_blocks < 0:
            raise ValueError(f"num_cpu_blocks must be >= 0, got {self.num_cpu_blocks}")
        if self.cpu_kv_memory_bytes is not None and (self.cpu_kv_memory_bytes < 0 or self.num_cpu_blocks):
            raise ValueError("cpu_kv_memory_bytes must be >= 0, and not set together with num_cpu_blocks")

    @property
    def kv_dtype(self) -> KVDtype:
        """How the pools store K and V: the cache layout's KV dtype, ``dtype`` for ``auto``."""
        return resolve_kv_dtype(self.cache.kv_dtype, self.dtype)

    @property
    def block_size(self) -> int:
        return self.cache.block_size

    @property
    def chunk_size(self) -> int:
        return self.cache.chunk_size

    @property
    def torch_dtype(self) -> torch.dtype:
        return DTYPES[self.dtype]

    @property
    def torch_device(self) -> torch.device:
        return torch.device(self.device)

    def kv_config(self, num_gpu_blocks: int, num_cpu_blocks: int | None = None) -> KVCacheConfig:
        """The block manager's settings once the tiers' sizes are known (``num_cpu_blocks`` None:
        the configured ``num_cpu_blocks``)."""
        cpu = self.num_cpu_blocks if num_cpu_blocks is None else num_cpu_blocks
        return KVCacheConfig(
            num_gpu_blocks, cpu, self.block_size, self.chunk_size, self.ttl_s, self.cpu_ttl_s
        )
