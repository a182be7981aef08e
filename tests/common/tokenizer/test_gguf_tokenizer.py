"""The tokenizer rebuilt from SmolLM2's GGUF metadata equals ``transformers``' tokenizer loaded from the
same file: ids, decoded text, special ids and chat-template output."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from kvgate.common.tokenizer import Tokenizer
from tests.common.tokenizer.samples import CONVERSATIONS, TEXTS


@pytest.mark.parametrize("text", TEXTS)
def test_encode_equals_transformers(tokenizer: Tokenizer, hf_tokenizer: Any, text: str) -> None:
    ids = tokenizer.encode(text)
    assert ids.dtype == np.uint32
    assert ids.tolist() == hf_tokenizer(text)["input_ids"]


@pytest.mark.parametrize("text", TEXTS)
def test_decode_equals_transformers_and_round_trips(
    tokenizer: Tokenizer, hf_tokenizer: Any, text: str
) -> None:
    ids = tokenizer.encode(text)
    assert tokenizer.decode(ids) == hf_tokenizer.decode(ids.tolist()) == text
    skipped = hf_tokenizer.decode(ids.tolist(), skip_special_tokens=True)
    assert tokenizer.decode(ids, skip_special_tokens=True) == skipped


def test_special_tokens_are_matched_whole(tokenizer: Tokenizer) -> None:
    ids = tokenizer.encode("<|im_start|>user\nhi<|im_end|>").tolist()
    assert ids[0] == 1
    assert ids[-1] == 2
    assert tokenizer.decode(ids, skip_special_tokens=True) == "user\nhi"


def test_special_ids_equal_transformers(tokenizer: Tokenizer, hf_tokenizer: Any) -> None:
    assert tokenizer.bos_token_id == hf_tokenizer.bos_token_id == 1
    assert tokenizer.eos_token_id == hf_tokenizer.eos_token_id == 2
    assert tokenizer.eos_token_ids == (2,)
    assert tokenizer.vocab_size == len(hf_tokenizer) == 49152
    assert (
        tokenizer.encode("Hi", add_special_tokens=True).tolist() == tokenizer.encode("Hi").tolist()
    )  # no BOS


@pytest.mark.parametrize("messages", CONVERSATIONS)
@pytest.mark.parametrize("add_generation_prompt", [True, False])
def test_chat_template_equals_transformers(
    tokenizer: Tokenizer, hf_tokenizer: Any, messages: list[dict[str, str]], add_generation_prompt: bool
) -> None:
    ours = tokenizer.apply_chat_template(messages, add_generation_prompt=add_generation_prompt)
    theirs = hf_tokenizer.apply_chat_template(
        messages, add_generation_prompt=add_generation_prompt, tokenize=False
    )
    assert ours == theirs
    encoded = hf_tokenizer.apply_chat_template(
        messages, add_generation_prompt=add_generation_prompt, return_dict=True
    )
    assert tokenizer.encode(ours, add_special_tokens=False).tolist() == list(encoded["input_ids"])


def test_chat_prompt_ends_with_the_assistant_header(tokenizer: Tokenizer) -> None:
    prompt = tokenizer.apply_chat_template([{"role": "user", "content": "Hi"}])
    assert prompt.startswith("<|im_start|>system\n")  # SmolLM2's template adds its default system prompt
    assert prompt.endswith("<|im_end|>\n<|im_start|>assistant\n")
