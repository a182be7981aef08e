"""Session fixtures: ``transformers``' tokenizer of the default model (ours, ``tokenizer``, and the GGUF
path, ``smollm2_path``, are session fixtures of tests/conftest.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.common.tokenizer.default_model import transformers_module


@pytest.fixture(scope="session")
def hf_tokenizer(smollm2_path: Path) -> Any:
    return transformers_module().AutoTokenizer.from_pretrained(
        smollm2_path.parent, gguf_file=smollm2_path.name
    )
