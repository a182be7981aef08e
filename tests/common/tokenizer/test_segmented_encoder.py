"""Encoding a text piece by piece, ids reused from the cache, gives exactly the ids of the whole text:
for the default model (SmolLM2, ChatML template), byte-level BPEs loaded as Llama 3 and Qwen2 GGUFs
(a Llama-3-style template), SentencePiece-like tokenizers (one whose cuts are refused, one with an added
token matched after normalization), on generated chats and texts: unicode, whitespace runs, digits,
special tokens or parts of them written in the text. And a prompt whose system prompt was seen before
tokenizes only what is new."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kvgate.common.tokenizer import SegmentCache, SegmentedEncoder, Tokenizer
from tests.common.tokenizer.tiny_bpe import (
    CHATML_SPECIALS,
    CHATML_TEMPLATE,
    LLAMA3_SPECIALS,
    LLAMA3_TEMPLATE,
    byte_level_gguf,
    metaspace,
)

FRAGMENTS = [
    " ", "  ", "   ", "\n", "\n\n", " \n", "\n ", "\t", "\r\n", "\r", "\u00a0", "\u3000",
    "hello", "Hello", "world", "the", "gateway", "HTTP", "x", "a",
    "1", "12", "123", "4567", "3.14", "-", "1,000", "٣",
    "'s", "'ll", "'RE", "don't", "'", '"', ",", ".", "!!", "...", "()", "{}", "#", "->", "_",
    "é", "naïve", "Straße", "ﬁ", "e\u0301", "Ω", "中文", "日本語", "한국어", "العربية",
    "😀", "👍🏽", "👨‍👩‍👧", "🇫🇷", "1️⃣",
    "<", ">", "|", "<|", "|>", "<|im_", "im_start", "<|im_start|", "<|eot_id",
    *CHATML_SPECIALS, *LLAMA3_SPECIALS, "<think>", "<repo_name>",
]  # fmt: skip
_CHARS = st.characters(exclude_categories=("Cs",))  # any code point a str may carry through UTF-8
TEXT = st.lists(st.sampled_from(FRAGMENTS) | st.text(_CHARS, max_size=4), max_size=12).map("".join)
MESSAGES = st.lists(
    st.fixed_dictionaries({"role": st.sampled_from(["system", "user", "assistant"]), "content": TEXT}),
    min_size=1,
    max_size=5,
)
SYSTEM = "You are kvgate's assistant.\nAnswer in  two lines, cite 12 sources 😀.\n\n" * 50


@pytest.fixture(
    scope="module",
    params=["smollm2", "llama3-gguf", "qwen2-gguf", "metaspace-always-normalized", "metaspace-first"],
)
def model(request: pytest.FixtureRequest) -> Tokenizer:
    builders = {
        "smollm2": lambda: request.getfixturevalue("tokenizer"),
        "llama3-gguf": lambda: byte_level_gguf("llama-bpe", LLAMA3_SPECIALS, LLAMA3_TEMPLATE),
        "qwen2-gguf": lambda: byte_level_gguf("qwen2", CHATML_SPECIALS, CHATML_TEMPLATE),
        "metaspace-always-normalized": lambda: metaspace("always", normalized_token="<think>"),
        "metaspace-first": lambda: metaspace("first"),  # cuts refused: whole texts, still cached
    }
    return builders[request.param]()


@pytest.fixture(scope="module")
def encoder(model: Tokenizer) -> SegmentedEncoder:
    """One encoder per tokenizer for all examples, its cache small enough to evict: pieces are both
    reused across examples and forgotten."""
    return SegmentedEncoder(model, SegmentCache(capacity_bytes=20_000))


def _whole(model: Tokenizer, text: str) -> list[int]:
    return model.backend.encode(text, add_special_tokens=False).ids  # the reference: one call, no cut


_PROPERTY = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@_PROPERTY
@given(messages=MESSAGES, generation_prompt=st.booleans())
def test_a_rendered_chat_encodes_as_the_whole_text(
    model: Tokenizer, encoder: SegmentedEncoder, messages: list[dict[str, str]], generation_prompt: bool
) -> None:
    text = model.apply_chat_template(messages, add_generation_prompt=generation_prompt)
    assert encoder.encode(text).tolist() == _whole(model, text)
    assert encoder.encode(text).tolist() == _whole(model, text)  # again, from the cache


@_PROPERTY
@given(text=TEXT)
def test_any_text_encodes_as_the_whole_text(model: Tokenizer, encoder: SegmentedEncoder, text: str) -> None:
    assert encoder.encode(text).tolist() == _whole(model, text)


@pytest.mark.parametrize(
    "text",
    ["", " ", "\n", "<|im_start|>", "<|im_start|><|im_end|>", " <|im_start|> ", "<|im_start|>\n\n  x  \n",
     "<|eot_id|><|eot_id|>", "a<|begin_of_text|>b", "1<|im_end|>2", "<|im_start|" + "|>"],
)  # fmt: skip
def test_edges_encode_as_the_whole_text(model: Tokenizer, encoder: SegmentedEncoder, text: str) -> None:
    ids = encoder.encode(text)
    assert ids.dtype == np.uint32
    assert ids.tolist() == _whole(model, text)


class _Counting(Tokenizer):
    """The tokenizer, counting the characters it is asked to tokenize."""

    def __init__(self, inner: Tokenizer) -> None:
        super().__init__(inner.backend, inner.special, inner.chat_template.source)
        self.chars = 0

    def encode_batch(self, texts: Sequence[str], *, add_special_tokens: bool = True) -> list:
        self.chars += sum(map(len, texts))
        return super().encode_batch(texts, add_special_tokens=add_special_tokens)


def test_a_chat_whose_system_prompt_was_seen_tokenizes_only_what_is_new(tokenizer: Tokenizer) -> None:
    counting = _Counting(tokenizer)
    encoder = SegmentedEncoder(counting, SegmentCache())
    first = counting.apply_chat_template(
        [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "hi"}]
    )
    encoder.encode(first)
    assert len(SYSTEM) < counting.chars <= len(first)  # cold: every distinct piece is tokenized once

    counting.chars = 0
    messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "What is a chunk?"}]
    second = counting.apply_chat_template(messages)
    assert encoder.encode(second).tolist() == _whole(tokenizer, second)
    assert counting.chars == len("user\nWhat is a chunk?")  # the new turn; the rest came from the cache
    assert counting.chars <= 0.01 * len(second)


def test_returned_ids_are_the_callers_own(tokenizer: Tokenizer) -> None:
    encoder = SegmentedEncoder(tokenizer, SegmentCache())
    text = "<|im_start|>user\nhello<|im_end|>\n"
    encoder.encode(text)[:] = 0  # the caller may write into its array
    assert encoder.encode(text).tolist() == _whole(tokenizer, text)


def test_a_disabled_cache_still_encodes_exactly(tokenizer: Tokenizer) -> None:
    encoder = SegmentedEncoder(tokenizer, SegmentCache(capacity_bytes=0))
    text = tokenizer.apply_chat_template(
        [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "hi"}]
    )
    assert encoder.encode(text).tolist() == _whole(tokenizer, text)
    assert len(encoder.cache) == 0
