"""The worker's model: a decoder over the paged KV cache (every supported family), and its weight loaders.

- ``ModelConfig`` (``config``): sizes and options, from a HF ``config.json`` (``families``: one module
  per family, a registry by ``model_type``) or GGUF metadata.
- ``DecoderModel`` (``decoder``): ``forward(input_ids [T], positions [T], attn, kv_caches)``
  -> logits ``[B', V]``.
- ``AttentionMetadata`` / ``build_step`` (``metadata``): how a step's flat batch maps onto sequences and
  cache slots.
- ``allocate_kv_caches`` (``kv_cache``): one paged K/V pool per layer.
- ``load_model`` (``loader``): from a ``.gguf`` file or a HF safetensors directory.
"""

from kvgate.workers.model.config import ModelConfig, MoEConfig, RopeScaling
from kvgate.workers.model.decoder import DecoderModel
from kvgate.workers.model.families import HF_ARCHITECTURES, model_config
from kvgate.workers.model.kv_cache import KVCache, allocate_kv_caches, kv_cache_bytes_per_block
from kvgate.workers.model.loader import load_config, load_model
from kvgate.workers.model.metadata import AttentionMetadata, ScheduledSequence, StepInputs, build_step

__all__ = [
    "HF_ARCHITECTURES",
    "AttentionMetadata",
    "DecoderModel",
    "KVCache",
    "MoEConfig",
    "ModelConfig",
    "RopeScaling",
    "ScheduledSequence",
    "StepInputs",
    "allocate_kv_caches",
    "build_step",
    "kv_cache_bytes_per_block",
    "load_config",
    "load_model",
    "model_config",
]
