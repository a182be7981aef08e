"""Cluster-test fixtures: the tiny chat model of the worker-service tests, saved once per session."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.service.tiny_model import save_tiny_chat_model
from tests.tokenizer.default_model import transformers_module


@pytest.fixture(scope="session")
def tiny_chat_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    transformers_module()  # skips (or fails in CI) without transformers, which saves the weights
    return save_tiny_chat_model(tmp_path_factory.mktemp("tiny-chat"))
