"""How generations end, with the tiny model and a tokenizer that spells id ``i`` as two letters: stop
strings (also across tokens; reported, not trimmed), stop token ids, EOS and ``ignore_eos``,
``max_tokens`` and the context length."""

from __future__ import annotations

from collections.abc import Callable

from kvgate.proto.sampling import FinishReason, SamplingParams
from kvgate.workers.engine import Completion, LLMEngine, run_to_completion
from tests.workers.engine.conftest import TinyPair
from tests.workers.engine.helpers import assert_no_leak, engine_for, letter_tokenizer, random_ids, request

PROMPT = random_ids(9, seed=40)
Greedy = Callable[[list[int], int], list[int]]


def _run(engine: LLMEngine, **sampling: object) -> Completion:
    params = SamplingParams(**{"temperature": 0, "max_tokens": 12, **sampling})  # type: ignore[arg-type]
    return run_to_completion(engine, [request("r", PROMPT, params)])["r"]


def test_a_stop_string_across_two_tokens(tiny: TinyPair, tiny_greedy: Greedy) -> None:
    expected = tiny_greedy(PROMPT, 12)
    tokenizer = letter_tokenizer()
    text = tokenizer.decode(expected)
    stop = text[5:8]  # the 2nd letter of token 2 and both of token 3
    ends = next(n for n in range(1, 13) if stop in text[: 2 * n])  # first token whose text completes it
    engine = engine_for(tiny.ours, gpu_blocks=16, tokenizer=tokenizer)
    done = _run(engine, stop=("zzzz", stop))
    assert (done.finish_reason, done.matched_stop) == (FinishReason.STOP, stop)
    assert list(done.token_ids) == expected[:ends]  # the tokens are not trimmed
    assert_no_leak(engine)


def test_a_stop_token_id_ends_after_that_token(tiny: TinyPair, tiny_greedy: Greedy) -> None:
    expected = tiny_greedy(PROMPT, 12)
    engine = engine_for(tiny.ours, gpu_blocks=16)
    done = _run(engine, stop_token_ids=(expected[4],))
    assert (done.finish_reason, done.matched_stop) == (FinishReason.STOP, None)
    assert list(done.token_ids) == expected[: expected.index(expected[4]) + 1]


def test_eos_ends_unless_ignored(tiny: TinyPair, tiny_greedy: Greedy) -> None:
    expected = tiny_greedy(PROMPT, 12)
    engine = engine_for(tiny.ours, gpu_blocks=16, tokenizer=letter_tokenizer(eos_ids=(expected[2],)))
    done = _run(engine)
    assert done.finish_reason is FinishReason.STOP
    assert list(done.token_ids) == expected[: expected.index(expected[2]) + 1]
    done = _run(engine, ignore_eos=True)
    assert (done.finish_reason, list(done.token_ids)) == (FinishReason.LENGTH, expected)


def test_max_tokens_and_the_context_length_end_with_length(tiny: TinyPair, tiny_greedy: Greedy) -> None:
    expected = tiny_greedy(PROMPT, 12)
    done = _run(engine_for(tiny.ours, gpu_blocks=16), max_tokens=5)
    assert (done.finish_reason, list(done.token_ids)) == (FinishReason.LENGTH, expected[:5])
    engine = engine_for(tiny.ours, gpu_blocks=16, max_model_len=13)  # 9 prompt tokens + 4 new ones
    done = _run(engine, max_tokens=100)
    assert (done.finish_reason, list(done.token_ids)) == (FinishReason.LENGTH, expected[:4])
    assert_no_leak(engine)
