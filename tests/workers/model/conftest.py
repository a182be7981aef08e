"""Model-test fixtures: one torch thread per module. The SmolLM2 session fixtures (kvgate's load and
``transformers``' load of the same GGUF, the greedy reference) live in ``tests/support/smollm2.py``."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import torch

from tests.support.smollm2 import NEW_TOKENS

__all__ = ["NEW_TOKENS"]


@pytest.fixture(autouse=True, scope="module")
def one_torch_thread() -> Iterator[None]:
    """Run each model-test module on one torch thread (the caller's choice; the model never sets it).
    The test machine's 2 cores are shared with other test runs, and OpenMP's spinning barriers make the
    tiny per-token matmuls of decode stall for seconds when a second thread is descheduled."""
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)
