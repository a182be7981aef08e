"""``load_model``: a model from any supported file, by its format."""

from __future__ import annotations

from pathlib import Path

import gguf
import torch

from kvgate.common.models import WeightFormat, weight_format
from kvgate.kernels.protocol import AttentionKernels
from kvgate.workers.model.config import ModelConfig
from kvgate.workers.model.decoder import DecoderModel
from kvgate.workers.model.gemm_tuning import install, plan_for
from kvgate.workers.model.gguf_weights import gguf_model_config, load_gguf_model
from kvgate.workers.model.hf_weights import hf_config, load_hf_model


def load_model(
    path: str | Path,
    kernels: AttentionKernels,
    *,
    device: torch.device | str = "cpu",
    dtype: torch.dtype = torch.float32,
    gemm: str = "linear",
) -> DecoderModel:
    """The model at ``path`` (a ``.gguf`` file or a HF directory with safetensors) in eval mode, its
    attention run by ``kernels``, its projections' products as ``gemm`` says (see
    :func:`kvgate.workers.model.gemm_tuning.plan_for`: ``auto`` measures them). Progress is logged
    (logger ``kvgate.workers.model.load``)."""
    if weight_format(path) is WeightFormat.GGUF:
        model = load_gguf_model(path, kernels, device=device, dtype=dtype)
    else:
        model = load_hf_model(path, kernels, device=device, dtype=dtype)
    install(model, plan_for(model, gemm))
    return model


def load_config(path: str | Path) -> ModelConfig:
    """The ``ModelConfig`` of the model at ``path``, without loading weights."""
    if weight_format(path) is WeightFormat.GGUF:
        return gguf_model_config(gguf.GGUFReader(path))
    return hf_config(path)
