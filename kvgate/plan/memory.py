"""The memory plan of one worker: how many KV blocks and tokens its GPU and CPU tiers hold.

A worker is one tensor-parallel group of ``tp`` GPUs of ``gpu_memory_bytes`` each. Per GPU::

    KV budget   = gpu_memory_bytes x memory_utilization - weight bytes / tp
    blocks      = floor(KV budget / bytes of one block's share on this GPU)
    tokens      = blocks x block_size

Weight bytes are :func:`parameter_count` x the compute dtype's bytes, split evenly across the ranks
(the few replicated norm weights are ignored). A block's share on one GPU is its KV heads' share: the
``num_kv_heads`` are split across the ranks (``tp`` divides them), or each rank holds one replicated
head (``num_kv_heads`` divides ``tp``). Every rank holds the same tokens, so a worker holds ``tokens``.
``memory_utilization`` is what may be used at all: activations, CUDA graphs and the allocator's slack
live in the rest, as with vLLM's ``gpu_memory_utilization``.

The CPU tier holds whole blocks of every rank in the worker's host memory: ``cpu_memory_bytes`` /
(``tp`` x one rank's block bytes) blocks.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from kvgate.plan.params import parameter_count
from kvgate.proto.kv_dtype import KVDtype, kv_block_bytes, kv_dtype
from kvgate.proto.layout import DEFAULT_BLOCK_SIZE, KVGeometry
from kvgate.proto.units import BlockCount, TokenCount

if TYPE_CHECKING:  # the workers' package imports torch: not at the CLI's start
    from kvgate.workers.model.config import ModelConfig


@dataclass(frozen=True, slots=True)
class MemoryInputs:
    """What a worker has. Validated on construction, never mutated. ``weight_dtype``: the compute
    dtype the weights are held in (a KV dtype name: ``bf16``, ``fp16``, ``fp32``)."""

    gpu_memory_bytes: int
    kv: KVDtype
    memory_utilization: float = 0.9
    tp: int = 1
    cpu_memory_bytes: int = 0
    weight_dtype: str = "bf16"
    block_size: int = DEFAULT_BLOCK_SIZE

    def __post_init__(self) -> None:
        if self.gpu_memory_bytes <= 0 or self.cpu_memory_bytes < 0:
            raise ValueError("GPU memory must be positive and CPU memory >= 0")
        if not 0 < self.memory_utilization <= 1:
            raise ValueError(f"memory utilization must be in (0, 1], got {self.memory_utilization}")
        if self.tp < 1 or self.block_size < 1:
            raise ValueError("tp and block_size must be >= 1")
        if kv_dtype(self.weight_dtype).scaled:
            raise ValueError(f"weights are held in a float dtype, not {self.weight_dtype}")


@dataclass(frozen=True, slots=True)
class Tier:
    """One tier of one worker: the bytes it gives the KV cache, and what they hold."""

    kv_bytes: int
    blocks: BlockCount
    tokens: TokenCount

    def prefix_copies(self, prefix_tokens: int, block_size: int) -> int:
        """How many copies of a ``prefix_tokens``-token prefix fit (each takes whole blocks)."""
        return self.blocks // -(-prefix_tokens // block_size)


@dataclass(frozen=True, slots=True)
class MemoryPlan:
    """One worker's plan. ``kv_bytes_per_token``: the whole model's KV of one token (every layer and KV
    head, K and V, scales amortised over a block); ``block_bytes_per_gpu``: one block's share on one
    GPU; ``weight_bytes_per_gpu``: the weights' share of one GPU."""

    inputs: MemoryInputs
    parameters: int
    kv_heads_per_gpu: int
    kv_bytes_per_token: float
    block_bytes_per_gpu: int
    weight_bytes_per_gpu: int
    gpu: Tier
    cpu: Tier


def plan_memory(config: ModelConfig, inputs: MemoryInputs) -> MemoryPlan:
    """The memory plan of one worker serving ``config``; ValueError when the weights leave no room
    for one KV block, or ``tp`` and the KV heads do not split evenly. Pure."""
    heads = kv_heads_per_gpu(config.num_kv_heads, inputs.tp)
    model_kv = KVGeometry(config.num_layers, config.num_kv_heads, config.head_dim)
    gpu_kv = KVGeometry(config.num_layers, heads, config.head_dim)  # one rank's share of the heads
    per_gpu = kv_block_bytes(gpu_kv, inputs.kv, inputs.block_size)
    params = parameter_count(config)
    weights = -(-params * kv_dtype(inputs.weight_dtype).element_bytes // inputs.tp)
    budget = int(inputs.gpu_memory_bytes * inputs.memory_utilization) - weights
    if budget < per_gpu:
        raise ValueError(
            f"the weights take {weights / 2**30:.2f} GiB of the {budget + weights:,} usable bytes per GPU: "
            "no room for one KV block (more memory, a higher --tp or --memory-utilization)"
        )
    return MemoryPlan(
        inputs=inputs,
        parameters=params,
        kv_heads_per_gpu=heads,
        kv_bytes_per_token=kv_block_bytes(model_kv, inputs.kv, inputs.block_size) / inputs.block_size,
        block_bytes_per_gpu=per_gpu,
        weight_bytes_per_gpu=weights,
        gpu=_tier(budget, per_gpu, inputs.block_size),
        cpu=_tier(inputs.cpu_memory_bytes, per_gpu * inputs.tp, inputs.block_size),
    )


def kv_heads_per_gpu(num_kv_heads: int, tp: int) -> int:
    """KV heads each of ``tp`` ranks holds: an even split, or one replicated head each when there are
    more ranks than heads; ValueError when neither divides the other."""
    if num_kv_heads % tp == 0:
        return num_kv_heads // tp
    if tp % num_kv_heads == 0:
        return 1
    raise ValueError(f"--tp {tp} cannot split {num_kv_heads} KV heads evenly (nor replicate them)")


def _tier(kv_bytes: int, block_bytes: int, block_size: int) -> Tier:
    blocks = kv_bytes // block_bytes
    return Tier(kv_bytes, BlockCount(blocks), TokenCount(blocks * block_size))
