"""Small tokenizers trained here (no model hub is reachable): a byte-level BPE exported as a GGUF's
metadata and loaded by kvgate's own GGUF path (Llama 3 and Qwen2 pre-tokenizers, their special tokens
and a Llama-3-style chat template), and Hugging Face tokenizers whose cuts are or are not provably exact.
"""

from __future__ import annotations

import json
from typing import Any

from tokenizers import AddedToken, Regex, decoders, models, normalizers, pre_tokenizers, trainers
from tokenizers import Tokenizer as Backend

from kvgate.common.tokenizer import SpecialTokens, Tokenizer, tokenizer_from_gguf
from kvgate.common.tokenizer.gguf_bpe import _LLAMA3_SPLIT, CONTROL
from tests.common.tokenizer.samples import TEXTS

LLAMA3_SPECIALS = ["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>",
                   "<|eot_id|>"]  # fmt: skip
LLAMA3_TEMPLATE = (
    "{{- bos_token }}"
    "{%- for message in messages %}"
    "{{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n' + message['content'] | trim"
    " + '<|eot_id|>' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{%- endif %}"
)
CHATML_SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
CHATML_TEMPLATE = (
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content']"
    " + '<|im_end|>' + '\\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}"
    "{% endif %}"
)
_CORPUS = [*TEXTS, "The gateway routes each request to the worker that holds its prefix blocks. " * 4,
           "System: you are a helpful assistant.\n\nUser: what's 12 + 30?\nAssistant: 42.\n"]  # fmt: skip


def _trained(pre_tokenizer: pre_tokenizers.PreTokenizer, alphabet: list[str], vocab_size: int) -> Backend:
    backend = Backend(models.BPE())
    backend.pre_tokenizer = pre_tokenizer
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, initial_alphabet=alphabet, show_progress=False)
    backend.train_from_iterator(_CORPUS * 3, trainer)
    return backend


def byte_level_gguf(pre: str, specials: list[str], template: str) -> Tokenizer:
    """A byte-level BPE as a ``gpt2``-model GGUF describes it (``tokenizer.ggml.pre`` = ``pre``), the
    ``specials`` as control tokens (the first one is BOS), loaded by ``tokenizer_from_gguf``."""
    split = pre_tokenizers.Split(Regex(_LLAMA3_SPLIT), behavior="isolated")
    byte_level = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    trained = _trained(pre_tokenizers.Sequence([split, byte_level]), pre_tokenizers.ByteLevel.alphabet(), 600)
    model = json.loads(trained.to_str())["model"]
    tokens = sorted(model["vocab"], key=model["vocab"].get) + specials
    merges = [m if isinstance(m, str) else " ".join(m) for m in model["merges"]]
    metadata: dict[str, Any] = {
        "tokenizer.ggml.model": "gpt2",
        "tokenizer.ggml.pre": pre,
        "tokenizer.ggml.tokens": tokens,
        "tokenizer.ggml.merges": merges,
        "tokenizer.ggml.token_type": [1] * (len(tokens) - len(specials)) + [CONTROL] * len(specials),
        "tokenizer.ggml.bos_token_id": tokens.index(specials[0]),
        "tokenizer.chat_template": template,
    }
    return tokenizer_from_gguf(metadata)


def metaspace(prepend_scheme: str, normalized_token: str | None = None) -> Tokenizer:
    """A SentencePiece-like BPE (NFKC, Metaspace with ``prepend_scheme``) with ChatML's special tokens
    and, given ``normalized_token``, an added token matched after normalization."""
    pre = pre_tokenizers.Metaspace(prepend_scheme=prepend_scheme)
    alphabet = sorted({c for text in _CORPUS for c in text} | {"▁"})
    backend = _trained(pre, alphabet, 400)
    backend.normalizer = normalizers.NFKC()
    backend.decoder = decoders.Metaspace(prepend_scheme=prepend_scheme)
    backend.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in CHATML_SPECIALS])
    if normalized_token is not None:
        backend.add_tokens([AddedToken(normalized_token, normalized=True)])
    return Tokenizer(backend, SpecialTokens(bos_id=None, eos_ids=(0,)), CHATML_TEMPLATE)
