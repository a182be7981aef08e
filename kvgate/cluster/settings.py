"""``ClusterSettings``: what ``kvgate up`` / ``workers`` / ``gateway`` run, validated once, never mutated."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from kvgate.cluster.lora_spec import LoraPlacement
from kvgate.common.grpc_tls import TlsFiles
from kvgate.gateway.routing.config import RoutingConfig
from kvgate.gateway.settings import HttpTimeouts
from kvgate.gateway.tenancy import KeyRing
from kvgate.proto.layout import CacheLayout

DEFAULT_CPU_WORKERS = 2
WORKER_DTYPES = ("auto", "float32", "bfloat16", "float16")
WORKER_GEMMS = ("auto", "linear", "mv", "onednn", "transposed")  # EngineConfig.gemm (checked there too)
PORTS_PER_NODE = 8  # one worker per GPU, up to 8 per node


@dataclass(frozen=True, slots=True)
class KVSizing:
    """KV pools per worker. ``num_gpu_blocks``: the main tier's blocks on CPU-only nodes (there the
    "GPU tier" lives in host memory); on GPU nodes ``gpu_memory_fraction`` of the free device memory
    sizes it. ``kv_memory_bytes``, when set, sizes it on either kind of node instead (bytes; blocks at
    the KV dtype's bytes per block). ``num_cpu_blocks``: the offload tier (0: none), or
    ``cpu_kv_memory_bytes`` bytes of it when set. ``max_model_len``: most tokens of one sequence, also
    the gateway's context window."""

    num_gpu_blocks: int = 512
    gpu_memory_fraction: float = 0.85
    num_cpu_blocks: int = 0
    max_model_len: int = 4096
    kv_memory_bytes: int | None = None
    cpu_kv_memory_bytes: int | None = None

    def __post_init__(self) -> None:
        if self.num_gpu_blocks < 1 or self.num_cpu_blocks < 0 or self.max_model_len < 2:
            raise ValueError("need num_gpu_blocks >= 1, num_cpu_blocks >= 0 and max_model_len >= 2")
        if self.cpu_kv_memory_bytes is not None and self.num_cpu_blocks:
            raise ValueError("give --num-cpu-blocks or --cpu-kv-memory, not both")
        if not 0 < self.gpu_memory_fraction <= 1:
            raise ValueError(f"gpu_memory_fraction must lie in (0, 1], got {self.gpu_memory_fraction}")


@dataclass(frozen=True, slots=True)
class ClusterSettings:
    """One command's settings.

    - ``model_path``: the model (``.gguf`` or HF directory) every worker loads and the gateway tokenizes
      with; ``model_name``: the name clients use; ``cache``: the deployment's cache layout and secret.
    - ``workers``: worker actors to place (None: one per GPU of the cluster, or 2 without GPUs);
      ``cpus_per_worker``: Ray CPUs (and torch threads) per worker on CPU-only clusters; ``dtype``: the
      workers' weights and KV cache (one of :data:`WORKER_DTYPES`; ``auto``: bfloat16 on a GPU, float32
      on a CPU); ``gemm``: how the workers' projections multiply decode batches
      (``kvgate.workers.engine.EngineConfig.gemm``; ``auto``: measured at load).
    - ``redis_url``: the shared index (None: embedded, the gateway follows the workers' events).
    - ``ray_address``: join this Ray cluster (None: start a private local one, files in ``ray_temp_dir``).
    - ``host`` / ``port`` / ``grpc_port``: where the gateway listens (HTTP, gRPC).
    - ``ready_timeout_s``: how long to wait for the workers to load before giving up.
    - ``policy``: the gateway's routing policy (``kvgate.gateway.routing.policy_names()``);
      ``routing``: its cost model's parameters (``--routing-config KEY=VALUE``).
    - ``worker_port`` / ``worker_metrics_port``: worker i of a node serves gRPC / ``/metrics`` on the
      i-th free port from these (up to ``PORTS_PER_NODE``; 0: any free port).
    - ``keys``: the gateway's tenants and their hashed API keys (None: no authentication);
      ``max_concurrent_requests``: the gateway's bound on generations in flight; ``http_timeouts``: how
      long its HTTP front waits on slow clients; ``admin_keys``: the keys of its operators' endpoints
      (None: open); ``shutdown_grace_s``: how long requests in flight may finish at shutdown.
    - ``tls``: TLS on the gateway-worker gRPC link (the same files on every node; None: plaintext).
    - ``stall_timeout_s``: a worker whose engine holds requests without finishing a step this long is
      declared hung: its requests fail (the gateway re-routes them) and Ray restarts it.
    - ``lora``: LoRA adapters and the workers that load them (:mod:`kvgate.cluster.lora_spec`);
      ``lora_dir``: a folder of adapters every worker loads on request (the same path on every node).
    """

    model_path: Path
    model_name: str
    cache: CacheLayout
    kv: KVSizing = field(default_factory=KVSizing)
    workers: int | None = None
    cpus_per_worker: int = 1
    dtype: str = "auto"
    gemm: str = "auto"
    redis_url: str | None = None
    ray_address: str | None = None
    ray_temp_dir: str | None = None
    host: str = "127.0.0.1"
    port: int = 8000
    grpc_port: int = 50051
    ready_timeout_s: float = 600.0
    policy: str = "kvgate"
    routing: RoutingConfig = field(default_factory=RoutingConfig)
    worker_port: int = 0
    worker_metrics_port: int = 0
    stall_timeout_s: float = 120.0
    keys: KeyRing | None = None
    max_concurrent_requests: int = 1024
    http_timeouts: HttpTimeouts = field(default_factory=HttpTimeouts)
    admin_keys: KeyRing | None = None
    shutdown_grace_s: float = 30.0
    tls: TlsFiles | None = None
    lora: tuple[LoraPlacement, ...] = ()
    lora_dir: Path | None = None

    def __post_init__(self) -> None:
        if self.workers is not None and self.workers < 1:
            raise ValueError(f"--workers must be >= 1, got {self.workers}")
        if self.cpus_per_worker < 1:
            raise ValueError(f"--cpus-per-worker must be >= 1, got {self.cpus_per_worker}")
        if self.dtype not in WORKER_DTYPES:
            raise ValueError(f"--dtype must be one of {', '.join(WORKER_DTYPES)}, got {self.dtype!r}")
        if self.gemm not in WORKER_GEMMS:
            raise ValueError(f"--gemm must be one of {', '.join(WORKER_GEMMS)}, got {self.gemm!r}")
        for name in ("port", "grpc_port"):
            if not 0 <= getattr(self, name) < 65536:
                raise ValueError(f"{name} must lie in [0, 65536)")
        if not self.model_name:
            raise ValueError("the model name must not be empty")

    def worker_count(self, gpus: int) -> int:
        """``workers``, or one per GPU, or :data:`DEFAULT_CPU_WORKERS` on a CPU-only cluster."""
        return self.workers or gpus or DEFAULT_CPU_WORKERS
