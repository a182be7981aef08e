"""The key/value metadata of a GGUF file as plain Python values. Torch-free.

A GGUF file holds, besides its tensors, typed key/values under llama.cpp's names: the architecture
(``general.architecture``), its hyper-parameters (``llama.block_count``, ...) and the tokenizer
(``tokenizer.ggml.tokens``, ``tokenizer.ggml.merges``, ``tokenizer.chat_template``, ...).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import gguf

GGUFMetadata = Mapping[str, Any]


def read_gguf_metadata(path: str | Path) -> dict[str, Any]:
    """Every key/value of the file at ``path``: strings as ``str``, numbers as ``int``/``float``, arrays as
    lists. The file is memory-mapped; its tensors are not read."""
    return metadata_of(gguf.GGUFReader(path))


def metadata_of(reader: gguf.GGUFReader) -> dict[str, Any]:
    """The key/values of an open reader (see ``read_gguf_metadata``)."""
    return {name: field.contents() for name, field in reader.fields.items()}


def architecture_key(metadata: GGUFMetadata, suffix: str, default: Any = None) -> Any:
    """``metadata["<architecture>.<suffix>"]``, e.g. ``architecture_key(m, "block_count")``; ``default``
    when absent."""
    return metadata.get(f"{metadata['general.architecture']}.{suffix}", default)
