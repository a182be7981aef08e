"""Load a Hugging Face model directory: ``config.json`` and ``*.safetensors`` shards."""

from __future__ import annotations

import json
from pathlib import Path

import torch
from safetensors import safe_open

from kvgate.kernels.protocol import AttentionKernels
from kvgate.workers.model.config import ModelConfig
from kvgate.workers.model.decoder import DecoderModel
from kvgate.workers.model.empty import empty_model
from kvgate.workers.model.families import model_config
from kvgate.workers.model.progress import LoadProgress
from kvgate.workers.model.weights import WeightLoader


def hf_config(folder: str | Path) -> ModelConfig:
    """The ``ModelConfig`` of the directory's ``config.json``; ``ValueError`` for an unsupported family."""
    return model_config(json.loads((Path(folder) / "config.json").read_text(encoding="utf-8")))


def load_hf_model(
    folder: str | Path, kernels: AttentionKernels, *, device: torch.device | str, dtype: torch.dtype
) -> DecoderModel:
    """The model of a HF directory, weights converted to ``dtype`` on ``device``. Every ``*.safetensors``
    file in it is read (sharded or not); tensors the model has no use for are skipped. Raises
    ``FileNotFoundError`` without weights, ``ValueError`` when a weight is missing or mis-shaped."""
    folder = Path(folder)
    files = sorted(folder.glob("*.safetensors"))
    if not files:
        raise FileNotFoundError(f"no *.safetensors files in {folder}")
    model = empty_model(hf_config(folder), kernels, device=device, dtype=dtype)
    loader = WeightLoader(model)
    progress = LoadProgress(str(folder), sum(len(_names(f)) for f in files))
    for file in files:
        with safe_open(file, framework="pt", device="cpu") as shard:
            for name in shard.keys():  # noqa: SIM118 (safe_open is not a mapping)
                loader.load(name, shard.get_tensor(name))
                progress.step(name)
    loader.finish()
    return model


def _names(file: Path) -> list[str]:
    with safe_open(file, framework="pt", device="cpu") as shard:
        return list(shard.keys())
