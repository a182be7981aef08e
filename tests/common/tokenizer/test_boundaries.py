"""Where texts are cut: at the added tokens the tokenizer matches in the raw text, leftmost-longest, and
only for tokenizers whose every step provably sees each piece alone (else no cut at all)."""

from __future__ import annotations

import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tokenizers import AddedToken, pre_tokenizers

from kvgate.common.tokenizer import Tokenizer
from kvgate.common.tokenizer.boundaries import SpecialTokenSplitter, special_token_splitter
from tests.common.tokenizer.tiny_bpe import (
    CHATML_SPECIALS,
    CHATML_TEMPLATE,
    LLAMA3_SPECIALS,
    LLAMA3_TEMPLATE,
    byte_level_gguf,
    metaspace,
)


def test_pieces_are_the_tokens_and_the_text_between() -> None:
    splitter = SpecialTokenSplitter(["<|im_start|>", "<|im_end|>"])
    text = "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"
    assert splitter.split(text) == [
        "<|im_start|>",
        "user\nhi",
        "<|im_end|>",
        "\n",
        "<|im_start|>",
        "assistant\n",
    ]
    assert splitter.split("") == []
    assert splitter.split("no token <|im_ here") == ["no token <|im_ here"]


def test_matches_are_leftmost_longest_and_never_overlap() -> None:
    splitter = SpecialTokenSplitter(["<a>", "<a><b>", "b><c"])
    # at "<a>" both "<a>" and "<a><b>" match: the longest wins; then "b><c" cannot start inside it
    assert splitter.split("x<a><b><c>y") == ["x", "<a><b>", "<c>y"]
    # leftmost first: "<a>" starts before "b><c" would
    assert splitter.split("<a>b><c") == ["<a>", "b><c"]


def _leftmost_longest(tokens: list[str], text: str) -> list[str]:
    """The reference: scan left to right, take the longest token starting here, else one character."""
    pieces, plain, i = [], "", 0
    while i < len(text):
        token = max((t for t in tokens if text.startswith(t, i)), key=len, default=None)
        if token is None:
            plain, i = plain + text[i], i + 1
            continue
        pieces += [plain, token] if plain else [token]
        plain, i = "", i + len(token)
    return [*pieces, plain] if plain else pieces


_TOKENS = st.lists(st.text("<|>ab", min_size=1, max_size=5), min_size=1, max_size=8)


@settings(max_examples=300, deadline=None)
@given(tokens=_TOKENS, text=st.text("<|>abc", max_size=30))
def test_splitting_is_leftmost_longest_for_any_tokens(tokens: list[str], text: str) -> None:
    assert SpecialTokenSplitter(tokens).split(text) == _leftmost_longest(tokens, text)


def test_a_position_costs_the_length_of_a_match_not_the_number_of_tokens() -> None:
    splitter = SpecialTokenSplitter([f"<unused{i}>" for i in range(6000)])  # as some vocabularies have
    started = time.perf_counter()
    assert splitter.split("<unused12" * 20_000) == ["<unused12" * 20_000]
    assert time.perf_counter() - started < 0.5  # tried one alternative after another: over 2 s


@pytest.mark.parametrize(
    "build",
    [
        pytest.param(
            lambda: byte_level_gguf("llama-bpe", LLAMA3_SPECIALS, LLAMA3_TEMPLATE), id="llama3-gguf"
        ),
        pytest.param(lambda: byte_level_gguf("qwen2", CHATML_SPECIALS, CHATML_TEMPLATE), id="qwen2-gguf"),
        pytest.param(lambda: metaspace("always", normalized_token="<think>"), id="metaspace-always"),
    ],
)
def test_supported_tokenizers_are_cut(build) -> None:
    assert special_token_splitter(build().backend) is not None


def test_the_default_model_is_cut_at_its_special_tokens(tokenizer: Tokenizer) -> None:
    splitter = special_token_splitter(tokenizer.backend)
    assert splitter is not None
    assert splitter.split("<|im_start|>system\nBe brief.<|im_end|>") == [
        "<|im_start|>", "system\nBe brief.", "<|im_end|>"
    ]  # fmt: skip


def _refused(change) -> None:
    tokenizer = byte_level_gguf("llama-bpe", LLAMA3_SPECIALS, LLAMA3_TEMPLATE)
    change(tokenizer.backend)
    assert special_token_splitter(tokenizer.backend) is None


@pytest.mark.parametrize(
    "change",
    [
        pytest.param(lambda b: b.add_special_tokens([AddedToken("<mask>", lstrip=True)]), id="lstrip-token"),
        pytest.param(
            lambda b: b.add_tokens([AddedToken("<w>", single_word=True, normalized=False)]),
            id="single-word-token",
        ),
        pytest.param(lambda b: setattr(b, "encode_special_tokens", True), id="special-tokens-as-text"),
        pytest.param(lambda b: b.enable_truncation(16), id="truncation"),
        pytest.param(lambda b: b.enable_padding(length=16), id="padding"),
        pytest.param(lambda b: setattr(b.model, "dropout", 0.1), id="bpe-dropout"),
        pytest.param(
            lambda b: setattr(b, "pre_tokenizer", pre_tokenizers.PreTokenizer.custom(_Whole())),
            id="custom-pre-tokenizer",
        ),
    ],
)
def test_tokenizers_whose_pieces_may_differ_are_not_cut(change) -> None:
    _refused(change)


def test_tokens_nested_too_deep_to_compile_are_not_cut() -> None:
    deep = [AddedToken("x" * i + "y", special=True, normalized=False) for i in range(1000)]
    _refused(lambda b: b.add_special_tokens(deep))


def test_metaspace_prepending_only_at_the_start_of_the_text_is_not_cut() -> None:
    # "▁" is prepended to the text's first piece alone: "user" after <|im_start|> gets none
    assert special_token_splitter(metaspace("first").backend) is None


def test_a_metaspace_first_inside_a_sequence_is_found() -> None:
    tokenizer = metaspace("always")
    tokenizer.backend.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.Digits(), pre_tokenizers.Metaspace(prepend_scheme="first")]
    )
    assert special_token_splitter(tokenizer.backend) is None


class _Whole:
    def pre_tokenize(self, pretok) -> None:
        pass
