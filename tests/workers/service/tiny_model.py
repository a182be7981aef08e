"""The tiny random Llama of the worker-service tests, saved with a byte-level tokenizer and a chat
template, so that a gateway and the workers tokenize alike (as with a real model directory)."""

from __future__ import annotations

import json
from pathlib import Path

import tokenizers
from tokenizers import decoders, models, pre_tokenizers

from tests.workers.model.tiny import COMMON, save_tiny_model

VARIANT = "llama-gqa"
CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def save_tiny_chat_model(folder: Path) -> Path:
    """Weights and config of the tiny model (no EOS: generation runs to ``max_tokens``), a tokenizer
    of its 320 ids (256 bytes, 2 chat markers, reserved specials) and its chat template."""
    save_tiny_model(VARIANT, folder)
    write_byte_tokenizer(folder, COMMON["vocab_size"])
    return folder


def write_byte_tokenizer(folder: Path, vocab_size: int) -> None:
    """``tokenizer.json``: one token per byte (ids 0-255), then ``<|im_start|>``, ``<|im_end|>`` and
    reserved specials up to ``vocab_size``; ``tokenizer_config.json`` with the chat template."""
    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    backend = tokenizers.Tokenizer(models.BPE(vocab={ch: i for i, ch in enumerate(alphabet)}, merges=[]))
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
    reserved = [f"<|reserved_{i}|>" for i in range(vocab_size - len(alphabet) - 2)]
    backend.add_special_tokens(["<|im_start|>", "<|im_end|>", *reserved])
    backend.save(str(folder / "tokenizer.json"))
    (folder / "tokenizer_config.json").write_text(json.dumps({"chat_template": CHAT_TEMPLATE}))
