"""What ``kvgate plan`` takes as a model: ``default`` (or its id), a ``.gguf``, a HF folder, a config.json."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from kvgate.cli.main import main
from kvgate.common.models import DEFAULT_MODEL_ID, default_model_path
from kvgate.plan.model_source import resolve_model

LLAMA3_8B = Path(__file__).parent / "data" / "llama-3-8b-config.json"


def test_a_folder_reads_its_config_json(tmp_path: Path) -> None:
    shutil.copy(LLAMA3_8B, tmp_path / "config.json")  # no weights needed to plan
    assert resolve_model(str(tmp_path)).config == resolve_model(str(LLAMA3_8B)).config


def test_the_default_model_by_alias_or_id_is_the_packaged_gguf() -> None:
    gguf = resolve_model(str(default_model_path()))
    assert resolve_model("default") == gguf
    assert resolve_model(DEFAULT_MODEL_ID) == gguf


def test_a_missing_model_is_an_error_naming_what_is_accepted(capsys: pytest.CaptureFixture) -> None:
    assert main(["plan", "no/such/model"]) == 2
    assert "give `default`, a .gguf file or a config.json" in capsys.readouterr().err


def test_an_unsupported_family_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    config = {**json.loads(LLAMA3_8B.read_text()), "model_type": "gpt2"}
    (tmp_path / "config.json").write_text(json.dumps(config))
    assert main(["plan", str(tmp_path / "config.json")]) == 2
    assert "'gpt2' is not supported" in capsys.readouterr().err
