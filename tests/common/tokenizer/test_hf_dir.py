"""A tokenizer loaded from a Hugging Face directory (``tokenizer.json`` + configs) behaves like
``transformers``' tokenizer saved there, and reads special ids and templates from the usual files."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kvgate.common.tokenizer import Tokenizer, load_tokenizer, tokenizer_from_hf_dir
from tests.common.tokenizer.samples import CONVERSATIONS, TEXTS


@pytest.fixture(scope="module")
def saved_dir(hf_tokenizer: Any, tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("hf_tokenizer")
    hf_tokenizer.save_pretrained(folder)
    (folder / "config.json").write_text(json.dumps({"model_type": "llama"}))  # makes it a model directory
    return folder


def test_saved_directory_equals_transformers(
    saved_dir: Path, hf_tokenizer: Any, tokenizer: Tokenizer
) -> None:
    loaded = load_tokenizer(saved_dir)
    for text in TEXTS:
        ids = loaded.encode(text).tolist()
        assert ids == hf_tokenizer(text)["input_ids"] == tokenizer.encode(text).tolist()
        assert loaded.decode(ids) == hf_tokenizer.decode(ids)
    for messages in CONVERSATIONS:
        assert loaded.apply_chat_template(messages) == hf_tokenizer.apply_chat_template(
            messages, add_generation_prompt=True, tokenize=False
        )
    assert (loaded.bos_token_id, loaded.eos_token_ids) == (1, (2,))


def _write(folder: Path, name: str, content: Any) -> None:
    text = content if isinstance(content, str) else json.dumps(content)
    (folder / name).write_text(text, encoding="utf-8")


def test_special_ids_and_template_files(tokenizer: Tokenizer, tmp_path: Path) -> None:
    tokenizer.backend.save(str(tmp_path / "tokenizer.json"))
    templates = [{"name": "tool_use", "template": "T"}, {"name": "default", "template": "{{ bos_token }}D"}]
    _write(
        tmp_path,
        "tokenizer_config.json",
        {"bos_token": {"content": "<|im_start|>"}, "eos_token": "<|endoftext|>", "chat_template": templates},
    )
    _write(tmp_path, "generation_config.json", {"eos_token_id": [0, 2]})

    loaded = tokenizer_from_hf_dir(tmp_path)
    assert loaded.bos_token_id == 1
    assert loaded.eos_token_ids == (
        0,
        2,
    )  # the config's EOS first, then the generation config's, deduplicated
    assert loaded.apply_chat_template([]) == "<|im_start|>D"  # the list entry named "default"

    _write(tmp_path, "chat_template.jinja", "{{ eos_token }}J")
    assert tokenizer_from_hf_dir(tmp_path).apply_chat_template([]) == "<|endoftext|>J"  # the file wins


def test_no_chat_template_is_an_error(tokenizer: Tokenizer, tmp_path: Path) -> None:
    tokenizer.backend.save(str(tmp_path / "tokenizer.json"))
    loaded = tokenizer_from_hf_dir(tmp_path)
    assert loaded.chat_template is None
    assert loaded.eos_token_ids == ()
    with pytest.raises(ValueError, match="no chat template"):
        loaded.apply_chat_template([{"role": "user", "content": "hi"}])
