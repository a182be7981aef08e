"""Supported model families, by the ``model_type`` of a HF ``config.json``: a registry, no if/elif ladder.

Each family (one module each) parses its ``config.json`` into a ``ModelConfig`` (the options its layers
need) and names where its checkpoint's layer weights go in ``DecoderModel``. Adding a family: a module
with a ``Family``, one line in ``_FAMILIES``, a tiny model in ``tests/workers/model/tiny.py``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kvgate.workers.model.config import ModelConfig
from kvgate.workers.model.families import gemma, llama, mixtral, phi3, qwen3
from kvgate.workers.model.families.family import Family, LayerTarget

_FAMILIES: dict[str, Family] = {
    family.model_type: family
    for family in (
        llama.LLAMA, llama.MISTRAL, llama.QWEN2, qwen3.QWEN3, qwen3.QWEN3_MOE,
        gemma.GEMMA2, gemma.GEMMA3, phi3.PHI3, mixtral.MIXTRAL,
    )
}  # fmt: skip
HF_ARCHITECTURES = frozenset(_FAMILIES)

__all__ = ["HF_ARCHITECTURES", "Family", "LayerTarget", "family_of", "model_config"]


def family_of(architecture: str) -> Family:
    """The family of a ``model_type`` (or a GGUF architecture of the same name); raises ``ValueError``
    listing the supported ones."""
    try:
        return _FAMILIES[architecture]
    except KeyError:
        raise ValueError(
            f"model_type {architecture!r} is not supported; supported: {', '.join(sorted(_FAMILIES))}"
        ) from None


def model_config(config: Mapping[str, Any]) -> ModelConfig:
    """The ``ModelConfig`` of a parsed ``config.json`` (transformers 4.x or 5.x spellings). Raises
    ``ValueError`` for an architecture or option kvgate does not implement, naming it."""
    return family_of(config.get("model_type", "")).parse(config)
