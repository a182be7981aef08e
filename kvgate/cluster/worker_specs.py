"""What each worker actor is built from and asks Ray for: CPU mode or one GPU per worker."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kvgate.cluster.lora_spec import adapters_of
from kvgate.cluster.settings import PORTS_PER_NODE, ClusterSettings, KVSizing
from kvgate.proto.ids import Epoch, WorkerId
from kvgate.proto.kv_dtype import resolve_kv_dtype
from kvgate.workers.engine import EngineConfig
from kvgate.workers.ray_actor import ActorSpec
from kvgate.workers.service import WorkerConfig


@dataclass(frozen=True, slots=True)
class Placement:
    """Ray resources of one worker actor: ``num_gpus`` 1 on GPU clusters (then 1 CPU), else 0 GPUs
    and ``num_cpus`` CPUs (its torch threads)."""

    num_cpus: int
    num_gpus: int

    @classmethod
    def for_cluster(cls, settings: ClusterSettings, gpus: int) -> Placement:
        return cls(1, 1) if gpus else cls(settings.cpus_per_worker, 0)

    def ray_options(self, max_restarts: int) -> dict[str, Any]:
        """``ActorClass.options(...)``: spread across nodes, restarted by Ray (-1: forever)."""
        return {
            "num_cpus": self.num_cpus,
            "num_gpus": self.num_gpus,
            "max_restarts": max_restarts,
            "scheduling_strategy": "SPREAD",
        }


def engine_config(settings: ClusterSettings, gpu: bool) -> EngineConfig:
    """GPU: Triton kernels (SDPA for a quantised KV dtype: the Triton path for it is checked only in
    Triton's interpreter so far), the KV tier sized by free memory. CPU: the SDPA kernels with a fixed
    number of blocks. ``--kv-memory`` sizes the KV tier in bytes on either. The dtype is the settings'
    (``auto``: bfloat16 on a GPU, float32 on a CPU); the KV dtype is the cache layout's."""
    kv = settings.kv
    common: dict[str, Any] = {"max_model_len": kv.max_model_len, "gemm": settings.gemm}
    if kv.cpu_kv_memory_bytes is not None:
        common["cpu_kv_memory_bytes"] = kv.cpu_kv_memory_bytes
    else:
        common["num_cpu_blocks"] = kv.num_cpu_blocks
    if gpu:
        dtype = "bfloat16" if settings.dtype == "auto" else settings.dtype
        quantised = resolve_kv_dtype(settings.cache.kv_dtype, dtype).scaled
        tier = {"gpu_memory_fraction": kv.gpu_memory_fraction}
        return EngineConfig(settings.cache, device="cuda", dtype=dtype, **_sized(kv, tier), **common,
                            kernel_backend="sdpa" if quantised else "triton")  # fmt: skip
    dtype = "float32" if settings.dtype == "auto" else settings.dtype
    tier = {"num_gpu_blocks": kv.num_gpu_blocks}
    return EngineConfig(settings.cache, dtype=dtype, **_sized(kv, tier), **common)


def _sized(kv: KVSizing, default: dict[str, Any]) -> dict[str, Any]:
    """The GPU tier's size: ``--kv-memory`` bytes when given, else ``default``."""
    return {"kv_memory_bytes": kv.kv_memory_bytes} if kv.kv_memory_bytes is not None else default


def actor_specs(settings: ClusterSettings, count: int, gpu: bool) -> list[ActorSpec]:
    """One spec per worker slot ``worker-0`` ... ``worker-{count-1}``; epochs and hosts are filled in
    by each incarnation. Torch threads: None, so the actor uses the CPUs Ray gave it. Each loads the
    LoRA adapters placed on it (ValueError for a placement on a worker beyond ``count``)."""
    engine = engine_config(settings, gpu)
    return [
        ActorSpec(
            # each worker exports /metrics too, and advertises its address in its registration
            WorkerConfig(
                settings.model_path,
                engine,
                WorkerId(f"worker-{i}"),
                Epoch(0),
                port=settings.worker_port,
                port_span=PORTS_PER_NODE,
                torch_threads=None,
                metrics_port=settings.worker_metrics_port,
                stall_timeout_s=settings.stall_timeout_s,
                tls=settings.tls,
                adapters=adapters_of(settings.lora, i, count),
                lora_dir=settings.lora_dir,
            ),
            redis_url=settings.redis_url,
        )
        for i in range(count)
    ]
