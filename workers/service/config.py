"""``WorkerConfig``: one worker incarnation's settings. Validated on construction, never mutated."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from kvgate.common.grpc_tls import TlsFiles
from kvgate.proto.ids import Epoch, WorkerId
from kvgate.proto.workers import check_adapter_id, check_worker_id
from kvgate.workers.engine import EngineConfig


@dataclass(frozen=True, slots=True)
class WorkerConfig:
    """What :meth:`WorkerServer.start` builds.

    - ``model_path``: a ``.gguf`` file or a HF safetensors directory; ``engine``: the engine's settings
      (its ``cache`` is the deployment's: the worker advertises ``engine.cache.fingerprint()``).
    - ``worker_id``: the stable slot name; ``epoch``: this incarnation's number, strictly higher than any
      earlier incarnation's of the slot (the cluster layer passes a fresh one, e.g. a timestamp).
    - ``host`` / ``port``: where the gRPC server binds (port 0: any free port); ``advertise_host``: the
      host others reach it at (None: ``host``), written into the registration's address.
      ``port_span``: with a fixed ``port`` (and ``metrics_port``), the first free one of ``port`` ...
      ``port + port_span - 1`` is taken, so the workers of one node get ``base + 0, base + 1, ...``.
    - ``max_queued_requests``: requests admitted beyond the running batch (``limits.max_num_seqs``);
      past both, Generate answers RESOURCE_EXHAUSTED.
    - ``subscriber_queue``: event items buffered per subscriber before it gets a fresh snapshot instead.
    - ``heartbeat_s``: the index heartbeat period; ``idle_tick_s``: how often an idle engine still steps
      (publishes TTL expiries, refreshes load).
    - ``torch_threads``: torch intra-op threads, the cores this worker was given (None: torch's default).
    - ``with_tokenizer``: load the model's tokenizer (needed for stop strings and its EOS ids).
    - ``shutdown_grace_s``: how long :meth:`WorkerServer.stop` lets running calls finish.
    - ``stall_timeout_s``: requests in flight with no engine step finishing for this long mean a hung
      engine: they fail and the worker reports itself broken (None: never). Far above the slowest step.
    - ``kv_fetch_timeout_s``: the most a fetch of a prompt's prefix KV from another worker may take
      (``GenerateRequest.kv_source``); past it the request computes its prompt itself.
    - ``adapters``: LoRA adapters to load at start, ``(id, PEFT folder)``; ``lora_dir``: a folder whose
      PEFT subfolders are loaded when a request first names them. The worker advertises both.
    """

    model_path: Path
    engine: EngineConfig
    worker_id: WorkerId
    epoch: Epoch
    host: str = "127.0.0.1"
    port: int = 0
    port_span: int = 1
    advertise_host: str | None = None
    max_queued_requests: int = 256
    subscriber_queue: int = 1024
    heartbeat_s: float = 1.0
    idle_tick_s: float = 1.0
    torch_threads: int | None = None
    with_tokenizer: bool = True
    node_id: str = ""
    metrics_address: str = ""
    metrics_port: int | None = None  # serve Prometheus /metrics here (0: any free port; None: not at all)
    shutdown_grace_s: float = 5.0
    stall_timeout_s: float | None = 120.0
    tls: TlsFiles | None = None  # serve gRPC over TLS (mutual when tls.ca is set)
    kv_fetch_timeout_s: float = 10.0
    adapters: tuple[tuple[str, Path], ...] = ()
    lora_dir: Path | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "model_path", Path(self.model_path))
        check_worker_id(self.worker_id)
        if self.epoch < 0:
            raise ValueError(f"epoch must be >= 0, got {self.epoch}")
        for name in ("port", "metrics_port"):
            value = getattr(self, name)
            if value is not None and not 0 <= value < 65536 - (self.port_span - 1 if value else 0):
                raise ValueError(f"{name} must lie in [0, 65536) with its span, got {value}")
        if self.port_span < 1:
            raise ValueError(f"port_span must be >= 1, got {self.port_span}")
        if self.max_queued_requests < 0 or self.subscriber_queue < 1:
            raise ValueError("max_queued_requests must be >= 0 and subscriber_queue >= 1")
        for name in ("heartbeat_s", "idle_tick_s", "shutdown_grace_s", "kv_fetch_timeout_s"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)}")
        if self.stall_timeout_s is not None and self.stall_timeout_s <= 0:
            raise ValueError(f"stall_timeout_s must be positive, got {self.stall_timeout_s}")
        if self.torch_threads is not None and self.torch_threads < 1:
            raise ValueError(f"torch_threads must be >= 1, got {self.torch_threads}")
        for adapter_id, _ in self.adapters:
            check_adapter_id(adapter_id)

    @property
    def max_in_flight(self) -> int:
        """Requests admitted at once: the running batch plus the queue."""
        return self.engine.limits.max_num_seqs + self.max_queued_requests

    def candidate_ports(self, base: int) -> range:
        """The ports to try in order for a server whose configured port is ``base`` (0: any)."""
        return range(base, base + self.port_span) if base else range(0, 1)

    def address(self, port: int) -> str:
        """The registration address once the server is bound to ``port``."""
        host = self.advertise_host or self.host
        return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
