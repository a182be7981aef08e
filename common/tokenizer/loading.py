"""Build a model's ``Tokenizer`` from its files: a GGUF file's metadata or a Hugging Face directory."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import tokenizers

from kvgate.common.models import WeightFormat, weight_format
from kvgate.common.tokenizer.gguf_bpe import byte_level_bpe
from kvgate.common.tokenizer.gguf_metadata import GGUFMetadata, read_gguf_metadata
from kvgate.common.tokenizer.tokenizer import SpecialTokens, Tokenizer


def load_tokenizer(path: str | Path) -> Tokenizer:
    """The tokenizer of the model at ``path``: a ``.gguf`` file or a Hugging Face directory."""
    if weight_format(path) is WeightFormat.GGUF:
        return tokenizer_from_gguf(read_gguf_metadata(path))
    return tokenizer_from_hf_dir(path)


def tokenizer_from_gguf(metadata: GGUFMetadata) -> Tokenizer:
    """From a GGUF file's metadata (see ``read_gguf_metadata``). Generation ends at the EOS and at
    llama.cpp's end-of-turn / end-of-message tokens (``eot_token_id``, ``eom_token_id``) when given."""
    stops = (metadata.get(f"tokenizer.ggml.{kind}_token_id") for kind in ("eos", "eot", "eom"))
    special = SpecialTokens(
        bos_id=metadata.get("tokenizer.ggml.bos_token_id"),
        eos_ids=_unique(stops),
        pad_id=metadata.get("tokenizer.ggml.padding_token_id"),
    )
    return Tokenizer(byte_level_bpe(metadata), special, metadata.get("tokenizer.chat_template"))


def tokenizer_from_hf_dir(folder: str | Path) -> Tokenizer:
    """From ``tokenizer.json`` and, when present, ``tokenizer_config.json`` (special tokens, chat
    template), ``chat_template.jinja`` (which wins over the config's template) and
    ``generation_config.json`` / ``config.json`` (further ids that end generation)."""
    folder = Path(folder)
    backend = tokenizers.Tokenizer.from_file(str(folder / "tokenizer.json"))
    config = _json(folder / "tokenizer_config.json")
    ids = {name: _token_id(backend, config.get(f"{name}_token")) for name in ("bos", "eos", "pad")}
    generation = _json(folder / "generation_config.json") or _json(folder / "config.json")
    special = SpecialTokens(
        bos_id=ids["bos"] if ids["bos"] is not None else generation.get("bos_token_id"),
        eos_ids=_unique([ids["eos"], *_as_list(generation.get("eos_token_id"))]),
        pad_id=ids["pad"],
    )
    return Tokenizer(backend, special, _hf_chat_template(folder, config))


def _hf_chat_template(folder: Path, config: Mapping[str, Any]) -> str | None:
    """The template source: ``chat_template.jinja``, else the config's string, else the entry named
    ``default`` of the config's list of named templates."""
    jinja_file = folder / "chat_template.jinja"
    if jinja_file.is_file():
        return jinja_file.read_text(encoding="utf-8")
    template = config.get("chat_template")
    if isinstance(template, list):
        named = {entry["name"]: entry["template"] for entry in template}
        return named.get("default")
    return template


def _token_id(backend: tokenizers.Tokenizer, token: str | Mapping[str, Any] | None) -> int | None:
    """The id of a token given as a string or as an added-token dict (``{"content": ...}``)."""
    if isinstance(token, Mapping):
        token = token.get("content")
    return backend.token_to_id(token) if token else None


def _json(path: Path) -> dict[str, Any]:
    """A JSON file's object, or {} when the file does not exist."""
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}


def _as_list(value: int | list[int] | None) -> list[int]:
    if value is None:
        return []
    return value if isinstance(value, list) else [value]


def _unique(ids: Any) -> tuple[int, ...]:
    """The ids that are not None, first occurrence first."""
    return tuple(dict.fromkeys(int(i) for i in ids if i is not None))
