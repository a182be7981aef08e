"""Engine-test fixtures. One torch thread (as in tests/workers/model: the 2 cores are shared). Models
are loaded once per session: a tiny random Llama saved as safetensors (with its ``transformers`` twin, the
reference) and, for the slow parity tests, SmolLM2-135M-Instruct and its ``transformers`` load from the
same GGUF (fixtures shared with tests/workers/model, which skip, or fail where ``CI`` is set, when the model
package or ``transformers`` is missing). Reference outputs are memoised for the session."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import torch

from kvgate.kernels import get_kernels
from kvgate.workers.engine import DEFAULT_KERNEL_BACKEND
from kvgate.workers.model import DecoderModel, load_model
from tests.common.tokenizer.default_model import transformers_module
from tests.workers.model.conftest import one_torch_thread  # noqa: F401 -- autouse, one thread here too
from tests.workers.model.tiny import save_tiny_model

TINY_VARIANT = "llama-gqa"


@dataclass(frozen=True)
class TinyPair:
    """The tiny model loaded by kvgate (``ours``) and by ``transformers`` (``hf``), from ``folder``."""

    hf: Any
    ours: DecoderModel
    folder: Path


@pytest.fixture(scope="session")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> TinyPair:
    transformers_module()
    folder = tmp_path_factory.mktemp(TINY_VARIANT)
    hf = save_tiny_model(TINY_VARIANT, folder)
    return TinyPair(hf, load_model(folder, get_kernels(DEFAULT_KERNEL_BACKEND), device="cpu"), folder)


@pytest.fixture(scope="session")
def tiny_greedy(tiny: TinyPair) -> Callable[[Sequence[int], int], list[int]]:
    """``transformers``' greedy continuation of exactly ``n`` tokens (the tiny model has no EOS), memoised."""
    memo: dict[tuple[tuple[int, ...], int], list[int]] = {}

    def generate(prompt: Sequence[int], n: int) -> list[int]:
        key = (tuple(prompt), n)
        if key not in memo:
            ids = torch.tensor([key[0]])
            with torch.inference_mode():
                out = tiny.hf.generate(ids, do_sample=False, max_new_tokens=n, min_new_tokens=n)
            memo[key] = out[0, len(prompt) :].tolist()
        return memo[key]

    return generate
