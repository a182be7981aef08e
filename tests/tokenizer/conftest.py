"""Session fixtures: the default model's tokenizer, ours and ``transformers``' (both from the same GGUF)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kvgate.tokenizer import Tokenizer, load_tokenizer
from tests.tokenizer.default_model import smollm2_gguf, transformers_module


@pytest.fixture(scope="session")
def smollm2_path() -> Path:
    return smollm2_gguf()


@pytest.fixture(scope="session")
def tokenizer(smollm2_path: Path) -> Tokenizer:
    return load_tokenizer(smollm2_path)


@pytest.fixture(scope="session")
def hf_tokenizer(smollm2_path: Path) -> Any:
    return transformers_module().AutoTokenizer.from_pretrained(
        smollm2_path.parent, gguf_file=smollm2_path.name
    )
