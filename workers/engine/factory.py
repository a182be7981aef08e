"""Building an engine from a model path: kernels, weights and tokenizer, on the configured device."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import torch

from kvgate.common.clock import Clock
from kvgate.common.tokenizer import load_tokenizer
from kvgate.kernels import get_kernels
from kvgate.workers.engine.config import EngineConfig
from kvgate.workers.engine.engine import LLMEngine
from kvgate.workers.kv import EventPublisher
from kvgate.workers.model import load_model
from kvgate.workers.model.lora import AdapterSet, load_peft_adapter


def load_engine(
    model_path: str | Path,
    config: EngineConfig,
    publisher: EventPublisher,
    *,
    clock: Clock | None = None,
    with_tokenizer: bool = True,
    adapters: Mapping[str, str | Path] | None = None,
    lora_dir: Path | None = None,
) -> LLMEngine:
    """An engine for the model at ``model_path`` (a ``.gguf`` file or a HF safetensors directory) with
    ``config``'s kernels, device and dtype. ``with_tokenizer=False`` skips the tokenizer (then stop
    strings are refused). ``adapters``: LoRA adapter id -> PEFT folder, each loaded for this model;
    ``lora_dir``: a folder whose PEFT subfolders are loaded when a request names them.
    Raises ValueError for a CUDA device when CUDA is unavailable; loading errors (missing files,
    unsupported architectures, adapters that do not fit the model) propagate from the loaders."""
    device = config.torch_device
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device {config.device} was asked for, but CUDA is not available")
    kernels = get_kernels(config.kernel_backend)
    model = load_model(model_path, kernels, device=device, dtype=config.torch_dtype, gemm=config.gemm)
    loaded = AdapterSet(
        load_peft_adapter(folder, name, model.config).to(device, config.torch_dtype)
        for name, folder in (adapters or {}).items()
    )
    tokenizer = load_tokenizer(model_path) if with_tokenizer else None
    return LLMEngine(
        config,
        model,
        kernels,
        publisher,
        tokenizer=tokenizer,
        clock=clock,
        adapters=loaded,
        lora_dir=lora_dir,
    )
