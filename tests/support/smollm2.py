"""SmolLM2-135M-Instruct loaded by kvgate and by ``transformers`` from the same GGUF file, and the greedy
reference. Session fixtures, registered once in ``tests/conftest.py`` so that the model and engine
tests share one load of each (each load takes seconds)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
import torch

from kvgate.common.tokenizer import Tokenizer, load_tokenizer
from kvgate.kernels import get_kernels
from kvgate.workers.engine import DEFAULT_KERNEL_BACKEND
from kvgate.workers.model import DecoderModel, load_model
from tests.common.tokenizer.default_model import smollm2_gguf, transformers_module

NEW_TOKENS = 24


@pytest.fixture(scope="session")
def smollm2_path() -> Path:
    return smollm2_gguf()


@pytest.fixture(scope="session")
def tokenizer(smollm2_path: Path) -> Tokenizer:
    return load_tokenizer(smollm2_path)


@pytest.fixture(scope="session")
def smollm2(smollm2_path: Path) -> DecoderModel:
    """kvgate's load on the engine's default kernels (SDPA), fp32."""
    kernels = get_kernels(DEFAULT_KERNEL_BACKEND)
    return load_model(smollm2_path, kernels, device="cpu", dtype=torch.float32)


@pytest.fixture(scope="session")
def smollm2_reference(smollm2_path: Path) -> DecoderModel:
    """kvgate's load on the reference kernels (the specification), fp32."""
    return load_model(smollm2_path, get_kernels("reference"), device="cpu", dtype=torch.float32)


@pytest.fixture(scope="session")
def hf_smollm2(smollm2_path: Path) -> Any:
    model = transformers_module().AutoModelForCausalLM.from_pretrained(
        smollm2_path.parent, gguf_file=smollm2_path.name, dtype=torch.float32
    )
    return model.eval()


@pytest.fixture(scope="session")
def hf_greedy(hf_smollm2: Any) -> Callable[[Sequence[int]], list[int]]:
    """``transformers``' greedy continuation of a prompt (up to ``NEW_TOKENS``, EOS included), memoised."""
    memo: dict[tuple[int, ...], list[int]] = {}

    def generate(prompt: Sequence[int]) -> list[int]:
        key = tuple(prompt)
        if key not in memo:
            ids = torch.tensor([key])
            out = hf_smollm2.generate(
                ids, attention_mask=torch.ones_like(ids), do_sample=False, max_new_tokens=NEW_TOKENS
            )
            memo[key] = out[0, len(key) :].tolist()
        return memo[key]

    return generate


@pytest.fixture(scope="session")
def chat_prompt(tokenizer: Tokenizer) -> Callable[..., list[int]]:
    """Token ids of a chat rendered by the model's template, ready for the assistant's reply."""

    def build(user: str, system: str | None = None) -> list[int]:
        messages = [{"role": "system", "content": system}] if system else []
        text = tokenizer.apply_chat_template([*messages, {"role": "user", "content": user}])
        return tokenizer.encode(text, add_special_tokens=False).tolist()

    return build
