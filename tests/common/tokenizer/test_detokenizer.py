"""Streaming detokenization: the deltas add up to the full decode, and valid text never streams a U+FFFD
even though byte-level BPE splits emoji and CJK characters across tokens."""

from __future__ import annotations

import pytest

from kvgate.common.tokenizer import IncrementalDetokenizer, Tokenizer
from tests.common.tokenizer.samples import TEXTS

REPLACEMENT = "\ufffd"


def _stream(detok: IncrementalDetokenizer, ids: list[int], chunk: int) -> list[str]:
    deltas = [detok.push(ids[i : i + chunk]) for i in range(0, len(ids), chunk)]
    return [*deltas, detok.flush()]


@pytest.mark.parametrize("chunk", [1, 3])
@pytest.mark.parametrize("text", [t for t in TEXTS if t])
def test_deltas_add_up_to_the_full_decode(tokenizer: Tokenizer, text: str, chunk: int) -> None:
    ids = tokenizer.encode(text).tolist()
    detok = IncrementalDetokenizer(tokenizer)
    deltas = _stream(detok, ids, chunk)
    assert "".join(deltas) == detok.text == tokenizer.decode(ids) == text
    assert not any(REPLACEMENT in delta for delta in deltas)


def test_a_character_split_across_tokens_is_held_back_until_complete(tokenizer: Tokenizer) -> None:
    ids = tokenizer.encode(" 😀").tolist()
    assert len(ids) > 1
    assert REPLACEMENT in tokenizer.decode(ids[:1])
    detok = IncrementalDetokenizer(tokenizer)
    assert [detok.push([i]) for i in ids] == [""] * (len(ids) - 1) + [" 😀"]


def test_the_prompt_gives_context_to_the_first_generated_token(tokenizer: Tokenizer) -> None:
    prompt = tokenizer.encode("Once upon").tolist()
    generated = tokenizer.encode("Once upon a time").tolist()[len(prompt) :]
    detok = IncrementalDetokenizer(tokenizer, prompt)
    assert "".join(_stream(detok, generated, 1)) == " a time"


def test_special_tokens_can_be_skipped(tokenizer: Tokenizer) -> None:
    ids = tokenizer.encode("Paris.<|im_end|>").tolist()
    detok = IncrementalDetokenizer(tokenizer, skip_special_tokens=True)
    assert "".join(_stream(detok, ids, 1)) == "Paris."


def test_invalid_bytes_surface_only_at_flush(tokenizer: Tokenizer) -> None:
    first_byte_of_emoji = tokenizer.encode(" 😀").tolist()[:1]
    detok = IncrementalDetokenizer(tokenizer)
    assert detok.push(first_byte_of_emoji) == ""
    assert detok.flush().endswith(REPLACEMENT)
