"""Token masks: the bitmask layout (bit ``t % 32`` of word ``t // 32``) applied as one tensor op, a
vocabulary that is not a multiple of 32, rows left alone, and the grammar's fallback where processing
left it no token; the masks llguidance fills for real grammar states."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from kvgate.common.tokenizer import Tokenizer, tokenizer_from_hf_dir
from kvgate.proto.constraint import OutputConstraint
from kvgate.workers.engine import GrammarCompiler
from kvgate.workers.engine.token_mask import GrammarMasker, apply_token_bitmask, bitmask_words
from tests.workers.service.tiny_model import write_byte_tokenizer

NEG = float("-inf")


def bitmask_of(allowed: list[set[int]], vocab: int) -> torch.Tensor:
    """The int32 bitmask ``[R, W]`` allowing exactly ``allowed[r]`` in row ``r`` (built bit by bit)."""
    words = torch.zeros(len(allowed), bitmask_words(vocab), dtype=torch.int64)
    for row, ids in enumerate(allowed):
        for t in ids:
            words[row, t // 32] |= 1 << (t % 32)
    return torch.where(words >= 2**31, words - 2**32, words).to(torch.int32)  # bit 31 is the sign bit


def test_words_cover_the_vocabulary() -> None:
    assert [bitmask_words(v) for v in (1, 32, 33, 320, 49152)] == [1, 1, 2, 10, 1536]


def test_exactly_the_allowed_tokens_keep_their_logits() -> None:
    vocab = 70  # three words, the last one partly used
    allowed = [{0, 31, 32, 63, 69}, set(range(0, 70, 3)), {5}]
    logits = torch.randn(3, vocab, generator=torch.Generator().manual_seed(1))
    masked = apply_token_bitmask(logits, bitmask_of(allowed, vocab))
    for row, ids in enumerate(allowed):
        kept = {t for t in range(vocab) if masked[row, t] != NEG}
        assert kept == ids
        assert torch.equal(masked[row, sorted(ids)], logits[row, sorted(ids)])
    assert masked.data_ptr() != logits.data_ptr()  # a new tensor: the input is untouched
    assert torch.isfinite(logits).all()


def test_bits_past_the_vocabulary_are_ignored_and_ids_past_the_mask_are_refused() -> None:
    logits = torch.zeros(1, 40)
    everything = torch.full((1, 1), -1, dtype=torch.int32)  # one word: ids 0-31 allowed, 32-39 not covered
    masked = apply_token_bitmask(logits, everything)
    assert torch.isfinite(masked[0, :32]).all()
    assert torch.isneginf(masked[0, 32:]).all()
    wide = torch.full((1, 2), -1, dtype=torch.int32)  # 64 bits for 40 ids
    assert torch.isfinite(apply_token_bitmask(logits, wide)).all()


@pytest.fixture(scope="module")
def byte_tokenizer(tmp_path_factory: pytest.TempPathFactory) -> Tokenizer:
    folder: Path = tmp_path_factory.mktemp("byte-tokenizer")
    write_byte_tokenizer(folder, 320)
    return tokenizer_from_hf_dir(folder)


def ids_of(tokenizer: Tokenizer, text: str) -> list[int]:
    return tokenizer.encode(text, add_special_tokens=False).tolist()


def test_llguidance_fills_each_rows_mask_from_its_own_state(byte_tokenizer: Tokenizer) -> None:
    compiler = GrammarCompiler(byte_tokenizer, 320, ())
    schema = {
        "type": "object",
        "properties": {"n": {"type": "integer"}},
        "required": ["n"],
        "additionalProperties": False,
    }
    grammar = compiler.compile(OutputConstraint.json_schema(schema))
    start, inside = grammar.start(), grammar.start()
    for token in ids_of(byte_tokenizer, '{"n": 4'):
        inside.advance(token)
    allowed = GrammarMasker(compiler.vocab_size).fill([start, inside])  # [2, 10]
    masked = apply_token_bitmask(torch.zeros(2, 320), allowed)
    text = [{byte_tokenizer.decode([t]) for t in range(320) if masked[r, t] == 0} for r in range(2)]
    assert text[0] == {"{"}
    assert text[1] == set("0123456789}")  # a digit or the end: no "," (no other property), no blanks


def test_rows_without_a_grammar_are_untouched(byte_tokenizer: Tokenizer) -> None:
    compiler = GrammarCompiler(byte_tokenizer, 320, ())
    masker = GrammarMasker(compiler.vocab_size)
    logits = torch.randn(3, 320, generator=torch.Generator().manual_seed(2))
    assert masker.constrain(logits, logits, [None, None, None]) is logits
    state = compiler.compile(OutputConstraint.any_json_object()).start()
    out = masker.constrain(logits, logits, [None, state, None])
    assert torch.equal(out[[0, 2]], logits[[0, 2]])
    assert (out[1] != NEG).sum() == 1  # only "{" may start an object


def test_a_row_processing_left_no_allowed_token_falls_back_to_its_raw_logits(
    byte_tokenizer: Tokenizer,
) -> None:
    compiler = GrammarCompiler(byte_tokenizer, 320, ())
    masker = GrammarMasker(compiler.vocab_size)
    state = compiler.compile(OutputConstraint.any_json_object()).start()
    raw = torch.randn(1, 320, generator=torch.Generator().manual_seed(3))
    brace = ids_of(byte_tokenizer, "{")[0]
    processed = raw.clone()
    processed[0, brace] = NEG  # e.g. a token min_tokens blocks: the grammar allows nothing else
    out = masker.constrain(processed, raw, [state])
    assert out[0, brace] == raw[0, brace]
    assert (out[0] != NEG).sum() == 1


def test_eos_is_allowed_only_where_the_output_is_a_complete_match(byte_tokenizer: Tokenizer) -> None:
    eos = 257  # <|im_end|> plays the model's EOS here
    compiler = GrammarCompiler(byte_tokenizer, 320, (eos,))
    state = compiler.compile(OutputConstraint.json_schema({"type": "integer"})).start()
    masker = GrammarMasker(compiler.vocab_size)

    def eos_allowed() -> bool:
        return bool(apply_token_bitmask(torch.zeros(1, 320), masker.fill([state]))[0, eos] == 0)

    assert not eos_allowed()  # nothing written yet: not a match
    state.advance(ids_of(byte_tokenizer, "-")[0])
    assert not eos_allowed()  # "-" is no integer yet
    state.advance(ids_of(byte_tokenizer, "7")[0])
    assert eos_allowed()  # "-7" is complete, though more digits could follow
    assert not state.complete
    state.advance(eos)
    assert state.complete
