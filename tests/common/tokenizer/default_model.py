"""What the parity tests need: the default model's GGUF and ``transformers``. Where one is missing the
test skips with the install command, but fails instead where ``CI`` is set (these tests are the proof of
parity and must run there)."""

from __future__ import annotations

import os
from pathlib import Path
from types import ModuleType
from typing import NoReturn

import pytest

from kvgate.common.models import ModelNotFoundError, default_model_path


def smollm2_gguf() -> Path:
    """Path of SmolLM2-135M-Instruct's GGUF, or skip / fail the calling test."""
    try:
        return default_model_path()
    except ModelNotFoundError as exc:
        _missing(f"default model not installed: {exc}")


def transformers_module() -> ModuleType:
    """The ``transformers`` package (the reference implementation), or skip / fail the calling test."""
    try:
        import transformers
    except ImportError as exc:
        _missing(f"transformers is not installed ({exc}): pip install -e '.[dev]'")
    return transformers


def _missing(reason: str) -> NoReturn:
    if os.environ.get("CI"):
        pytest.fail(f"CI must run the parity tests: {reason}")
    pytest.skip(reason)
