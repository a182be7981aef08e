"""Build a model without initialising its weights (a loader fills them next)."""

from __future__ import annotations

import torch

from kvgate.kernels.protocol import AttentionKernels
from kvgate.workers.model.config import ModelConfig
from kvgate.workers.model.decoder import DecoderModel
from kvgate.workers.model.rope import RotaryEmbedding


def empty_model(
    config: ModelConfig, kernels: AttentionKernels, *, device: torch.device | str, dtype: torch.dtype
) -> DecoderModel:
    """A ``DecoderModel`` on ``device`` whose parameters are uninitialised memory (random init of a large
    model costs seconds and is overwritten anyway); its RoPE frequencies are computed. In eval mode."""
    with torch.device("meta"):
        model = DecoderModel(config, kernels, dtype)
    model.to_empty(device=device)
    for module in model.modules():
        if isinstance(module, RotaryEmbedding):
            module.reset_parameters()
    return model.eval()
