"""The simulated cluster: how many workers, how much KV memory, how fast they compute.

Defaults describe one H100 (80 GB) serving an 8B Llama-3-class model in bf16, the hardware
:class:`~kvgate.gateway.routing.config.RoutingConfig`'s defaults are calibrated for:

- ``prefill_tokens_per_s = 10_000``: 8B x 2 FLOPs/token = 16 GFLOP/token plus attention over ~15k-token
  contexts, at 40-50 % of the H100's ~990 dense bf16 TFLOPs, gives 10-15k tokens/s for long prompts
  (vLLM/SGLang benchmark reports land in the same range); the low end, as RoutingConfig assumes.
- ``swap_in_tokens_per_s = 100_000``: a token's KV is 2 x 32 layers x 8 KV heads x 128 x 2 bytes =
  128 KiB, so 100k tokens/s is ~13 GB/s host-to-device (pageable copies; pinned PCIe 5 does 2-4x
  more). It is RoutingConfig's ``swap_in_cost_ratio = 0.1`` of the prefill rate.
- ``decode_step_s = 0.02``: one decode step of a small batch at ~15k context (16 GB of weights plus
  the batch's KV read at ~3 TB/s); every token after the first costs one step. The first token costs
  one step after the prefill, so even a fully cached prompt has a TTFT of one step.
- ``ttl_s = cpu_ttl_s = DEFAULT_TTL_S`` (300 s): the cache layout's default TTL
  (:mod:`kvgate.proto.layout`).
- ``kv_fetch_tokens_per_s = 20_000``: how fast a worker pulls a prefix's KV from the worker its
  decision names as KV source (``KVWorker.ExportKV``, over the cluster network): 20k tokens/s of
  128 KiB is ~2.6 GB/s, a fifth of a 100 Gb/s NIC and twice the prefill rate, the rate
  :class:`~kvgate.gateway.routing.config.RoutingConfig` assumes too (an assumption: ``bench/kv_fetch.py``
  measures a deployment's). 0: workers never fetch.
- ``heartbeat_s = 1``: how often a worker sends its load figures (and sweeps expired chunks).
- ``capacity_tokens = 1_000_000``: what 80 GB holds after 16 GB of weights, at 64 KiB/token
  (8B with FP8 KV) -- or ~0.5M tokens in bf16; the traces README's reference point is 1M.
"""

from __future__ import annotations

from dataclasses import dataclass

from kvgate.proto.layout import DEFAULT_BLOCK_SIZE, DEFAULT_CHUNK_SIZE, DEFAULT_TTL_S

# The engine's KV block size: load figures count blocks of this many tokens.
KV_BLOCK_TOKENS = DEFAULT_BLOCK_SIZE


@dataclass(frozen=True, slots=True)
class SimSettings:
    """Validated on construction, never mutated.

    ``capacity_tokens`` / ``cpu_capacity_tokens``: each worker's GPU / CPU tier, in tokens (0 CPU: no
    CPU tier); both are rounded down to whole chunks. ``speed`` multiplies the arrival rate (arrival
    times are divided by it). ``seed`` fixes every random-looking choice (the request keys).

    ``gateways``: gateway replicas, each with its own index replica, pending record and in-flight
    accounting, as deployed; a load balancer spreads the requests over them at random.
    ``event_delay_s``: how long a worker's events and load reports take to reach a gateway's replica
    (0 with one gateway: the embedded index). ``load_report_s``: how often a worker pushes its load
    when it changed (its event stream's 100 ms); ``heartbeat_s`` is its heartbeat and TTL sweep.
    ``index_events`` False: no worker event or load report reaches any gateway for the whole run
    (Redis and the workers' event streams out of reach); each gateway knows the workers from their
    registration only and routes on what it learns from its own decisions. ``admissions``: each
    worker announces every request it takes in (the chunks it will compute, its load with the request
    queued) on its event stream at once, as kvgate's workers do; False: only stored chunks and the
    periodic load reports travel (as before admissions were announced).
    ``kv_fetch_tokens_per_s``: the rate at which a worker fetches the KV its request's KV source
    holds (:mod:`kvgate.gateway.routing.kv_source`) before queueing the request; 0: never.
    """

    workers: int = 8
    capacity_tokens: int = 1_000_000
    cpu_capacity_tokens: int = 0
    chunk_size: int = DEFAULT_CHUNK_SIZE
    prefill_tokens_per_s: float = 10_000.0
    swap_in_tokens_per_s: float = 100_000.0
    decode_step_s: float = 0.02
    ttl_s: float = DEFAULT_TTL_S
    cpu_ttl_s: float = DEFAULT_TTL_S
    heartbeat_s: float = 1.0
    speed: float = 1.0
    seed: int = 0
    gateways: int = 1
    event_delay_s: float = 0.0
    load_report_s: float = 0.1
    index_events: bool = True
    admissions: bool = True
    kv_fetch_tokens_per_s: float = 20_000.0

    def __post_init__(self) -> None:
        if self.workers < 1:
            raise ValueError("workers must be >= 1")
        if self.chunk_size < 1 or self.capacity_tokens < self.chunk_size:
            raise ValueError("capacity_tokens must hold at least one chunk")
        if self.cpu_capacity_tokens < 0:
            raise ValueError("cpu_capacity_tokens must be >= 0")
        positive = (
            "prefill_tokens_per_s",
            "swap_in_tokens_per_s",
            "heartbeat_s",
            "speed",
            "ttl_s",
            "load_report_s",
        )
        for name in positive:
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive")
        if self.decode_step_s < 0 or self.cpu_ttl_s < 0 or self.event_delay_s < 0:
            raise ValueError("decode_step_s, cpu_ttl_s and event_delay_s must be >= 0")
        if self.kv_fetch_tokens_per_s < 0:
            raise ValueError("kv_fetch_tokens_per_s must be >= 0")
        if self.gateways < 1:
            raise ValueError("gateways must be >= 1")

    @property
    def gpu_chunks(self) -> int:
        return self.capacity_tokens // self.chunk_size

    @property
    def cpu_chunks(self) -> int:
        return self.cpu_capacity_tokens // self.chunk_size
