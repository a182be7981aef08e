"""The worker's model: a Llama-family decoder over the paged KV cache, and its weight loaders.

- ``ModelConfig`` (``config``): sizes and options, from a HF ``config.json`` or GGUF metadata.
- ``LlamaModel`` (``llama``): ``forward(input_ids [T], positions [T], attn, kv_caches) -> logits [B', V]``.
- ``AttentionMetadata`` / ``build_step`` (``metadata``): how a step's flat batch maps onto sequences and
  cache slots.
- ``allocate_kv_caches`` (``kv_cache``): one paged K/V pool per layer.
- ``load_model`` (``loader``): from a ``.gguf`` file or a HF safetensors directory.
"""

from kvgate.workers.model.config import ModelConfig, RopeScaling
from kvgate.workers.model.kv_cache import KVCache, allocate_kv_caches, kv_cache_bytes_per_block
from kvgate.workers.model.llama import LlamaModel
from kvgate.workers.model.loader import load_config, load_model
from kvgate.workers.model.metadata import AttentionMetadata, ScheduledSequence, StepInputs, build_step

__all__ = [
    "AttentionMetadata",
    "KVCache",
    "LlamaModel",
    "ModelConfig",
    "RopeScaling",
    "ScheduledSequence",
    "StepInputs",
    "allocate_kv_caches",
    "build_step",
    "kv_cache_bytes_per_block",
    "load_config",
    "load_model",
]
