"""A byte-level BPE tokenizer (``tokenizer.ggml.model == "gpt2"``) rebuilt from a GGUF file's metadata.

A GGUF carries no ``tokenizer.json``, only the pieces llama.cpp needs: the vocabulary already spelled in
GPT-2's byte alphabet, the merges in rank order, a type per token, and the name of the pre-tokenizer
(``tokenizer.ggml.pre``) whose splitting rule the merges were learned with. This rebuilds the same
``tokenizers.Tokenizer`` that the model's own ``tokenizer.json`` describes.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers, processors

log = logging.getLogger(__name__)

# llama.cpp's token types (tokenizer.ggml.token_type).
CONTROL = 3  # special tokens such as <|im_start|>: matched whole, skippable in decode
USER_DEFINED = 4  # added tokens such as <think>: matched whole, decoded as text

_LLAMA3_SPLIT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"
    r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
_QWEN2_SPLIT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"
    r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
_SPLITS = {
    **dict.fromkeys(("llama3", "llama-v3", "llama-bpe", "smaug-bpe"), _LLAMA3_SPLIT),
    **dict.fromkeys(("qwen2", "deepseek-r1-qwen"), _QWEN2_SPLIT),
}


def byte_level_bpe(metadata: Mapping[str, Any]) -> Tokenizer:
    """The tokenizer a ``gpt2``-model GGUF describes; raises ``ValueError`` for any other tokenizer model.

    Control tokens become special added tokens and user-defined ones plain added tokens (both matched whole
    in the text); a BOS / EOS is added by ``encode`` when ``tokenizer.ggml.add_bos_token`` /
    ``add_eos_token`` say so.
    """
    kind = metadata.get("tokenizer.ggml.model")
    if kind != "gpt2":
        raise ValueError(
            f"GGUF tokenizer model {kind!r} is not supported (only byte-level BPE, 'gpt2'); "
            "load the model's Hugging Face directory (tokenizer.json) instead"
        )
    tokens: list[str] = metadata["tokenizer.ggml.tokens"]
    vocab = {token: index for index, token in enumerate(tokens)}
    merges = [tuple(merge.split(" ", 1)) for merge in metadata["tokenizer.ggml.merges"]]
    tokenizer = Tokenizer(models.BPE(vocab=vocab, merges=merges, fuse_unk=False))
    tokenizer.pre_tokenizer = _pre_tokenizer(metadata.get("tokenizer.ggml.pre", "default"))
    tokenizer.decoder = decoders.ByteLevel()
    _add_whole_tokens(tokenizer, tokens, metadata.get("tokenizer.ggml.token_type") or [])
    post = _post_processor(metadata, tokens)
    if post is not None:
        tokenizer.post_processor = post
    return tokenizer


def _pre_tokenizer(name: str) -> pre_tokenizers.PreTokenizer:
    """How text is split before merging, for llama.cpp's pre-tokenizer ``name``. Unknown names get
    GPT-2's rule (with a warning), as Hugging Face does."""
    if name in _SPLITS:
        split = pre_tokenizers.Split(Regex(_SPLITS[name]), behavior="isolated")
        return pre_tokenizers.Sequence(
            [split, pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)]
        )
    gpt2 = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    if name == "smollm":  # SmolLM's tokenizer.json: every digit alone, then GPT-2's rule
        return pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True), gpt2])
    if name not in ("default", "gpt2"):
        log.warning("unknown GGUF pre-tokenizer %r: splitting text with GPT-2's rule", name)
    return gpt2


def _add_whole_tokens(tokenizer: Tokenizer, tokens: list[str], types: list[int]) -> None:
    """Register control and user-defined tokens so they are matched whole instead of being merged from
    bytes. A control token outside the byte alphabet is a llama.cpp mislabel and is left alone."""
    alphabet = set(pre_tokenizers.ByteLevel.alphabet())
    special = [t for t, kind in zip(tokens, types, strict=False) if kind == CONTROL and set(t) <= alphabet]
    added = [t for t, kind in zip(tokens, types, strict=False) if kind == USER_DEFINED]
    tokenizer.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in special])
    tokenizer.add_tokens([AddedToken(t, special=False, normalized=False) for t in added])


def _post_processor(metadata: Mapping[str, Any], tokens: list[str]) -> processors.PostProcessor | None:
    """A template adding BOS / EOS around the text when the file asks for it; None when it does not."""
    parts, specials = ["$A"], []
    for which, at_start in (("bos", True), ("eos", False)):
        token_id = metadata.get(f"tokenizer.ggml.{which}_token_id")
        if metadata.get(f"tokenizer.ggml.add_{which}_token") and token_id is not None:
            parts.insert(0 if at_start else len(parts), tokens[token_id])
            specials.append((tokens[token_id], token_id))
    if not specials:
        return None
    return processors.TemplateProcessing(single=" ".join(parts), special_tokens=specials)
