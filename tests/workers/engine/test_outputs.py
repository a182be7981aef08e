"""Sampling outputs on the tiny model, checked against its ``transformers`` twin: log-probabilities
equal the model's log-softmax, ``n`` choices fork one prefilled prompt, and penalties, ``logit_bias``
and ``min_tokens`` change greedy decoding exactly as a step-by-step reference over the twin's logits
does (the engine applies them batched, the reference one token at a time)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch

from kvgate.proto.sampling import SamplingParams
from kvgate.workers.engine import run_to_completion
from kvgate.workers.engine.logits import Processing, TokenHistory, process
from tests.workers.engine.conftest import TinyPair
from tests.workers.engine.helpers import assert_no_leak, engine_for, random_ids, request

PROMPT = random_ids(19, seed=70)  # 4 full blocks of 4 and 3 tokens more
Greedy = Callable[[list[int], int], list[int]]


def hf_logits(tiny: TinyPair, ids: list[int]) -> torch.Tensor:
    """``[len(ids), V]`` fp32: the twin's logits after each token of ``ids``."""
    with torch.inference_mode():
        return tiny.hf(torch.tensor([ids])).logits[0].float()


def test_logprobs_are_the_models_log_softmax(tiny: TinyPair) -> None:
    params = SamplingParams(temperature=0.8, seed=5, max_tokens=6, logprobs=4)
    engine = engine_for(tiny.ours, gpu_blocks=64)
    collected = []
    engine.add_request(request("a", PROMPT, params))
    while engine.has_work():
        collected += [lp for out in engine.step() for lp in out.logprobs]
    tokens = run_to_completion(engine_for(tiny.ours, gpu_blocks=64), [request("a", PROMPT, params)])["a"]
    expected = torch.log_softmax(hf_logits(tiny, PROMPT + list(tokens.token_ids)), dim=-1)
    assert len(collected) == 6
    for i, (token, lp) in enumerate(zip(tokens.token_ids, collected, strict=True)):
        row = expected[len(PROMPT) - 1 + i]  # the position that predicted token i
        assert lp.logprob == pytest.approx(row[token].item(), abs=1e-4)
        values, ids = row.topk(4)
        assert [t for t, _ in lp.top] == ids.tolist()
        assert [v for _, v in lp.top] == pytest.approx(values.tolist(), abs=1e-4)


def test_n_choices_fork_one_prefilled_prompt(tiny: TinyPair) -> None:
    engine = engine_for(tiny.ours, gpu_blocks=64)
    computed: list[int] = []
    forward = engine.runner.forward
    engine.runner.forward = lambda work, ids: computed.append(len(ids)) or forward(work, ids)  # type: ignore[method-assign]
    params = SamplingParams(temperature=1.0, seed=11, max_tokens=5, n=3)
    outputs = []
    engine.add_request(request("r", PROMPT, params))
    while engine.has_work():
        outputs += engine.step()
    final = outputs[-1]
    assert final.finished
    assert final.usage is not None
    assert (final.usage.prompt_tokens, final.usage.completion_tokens) == (19, 15)  # the prompt counts once
    by_choice = {i: [t for o in outputs if o.index == i for t in o.new_token_ids] for i in range(3)}
    assert all(len(tokens) == 5 for tokens in by_choice.values())
    assert sorted(o.index for o in outputs if o.choice_end is not None) == [0, 1, 2]
    # the prompt was computed once: each fork computed only the prompt's last partial block (3 tokens)
    # and its first token, never the 16 tokens of the prompt's full blocks; then each choice decodes
    assert computed == [19, 1 + 2 * (3 + 1), 3, 3, 3]
    # choice 0 samples what the request would alone; the forks draw their own samples
    single = SamplingParams(temperature=1.0, seed=11, max_tokens=5)
    alone = run_to_completion(engine_for(tiny.ours, gpu_blocks=64), [request("s", PROMPT, single)])
    assert by_choice[0] == list(alone["s"].token_ids)
    assert len({tuple(t) for t in by_choice.values()}) > 1
    assert_no_leak(engine)


def test_greedy_choices_all_equal_the_greedy_continuation(tiny: TinyPair, tiny_greedy: Greedy) -> None:
    engine = engine_for(tiny.ours, gpu_blocks=64)
    outputs = []
    engine.add_request(request("g", PROMPT, SamplingParams(temperature=0, max_tokens=6, n=4)))
    while engine.has_work():
        outputs += engine.step()
    for i in range(4):
        assert [t for o in outputs if o.index == i for t in o.new_token_ids] == tiny_greedy(PROMPT, 6)


def reference_greedy(tiny: TinyPair, params: SamplingParams, stop_ids: set[int]) -> list[int]:
    """Greedy decoding over the twin's logits with the penalties applied token by token (OpenAI's and
    vLLM's formulas, one vocabulary entry at a time)."""
    ids, out = list(PROMPT), []
    while len(out) < params.max_tokens:
        logits = hf_logits(tiny, ids)[-1].tolist()
        for token in range(len(logits)):
            count = out.count(token)
            if params.repetition_penalty != 1 and token in ids:
                r = params.repetition_penalty
                logits[token] = logits[token] / r if logits[token] > 0 else logits[token] * r
            logits[token] -= params.frequency_penalty * count + params.presence_penalty * (count > 0)
        for token, bias in params.logit_bias:
            logits[token] += bias
        if len(out) < params.min_tokens:
            for token in stop_ids:
                logits[token] = float("-inf")
        out.append(max(range(len(logits)), key=logits.__getitem__))
        ids.append(out[-1])
        if out[-1] in stop_ids and len(out) > params.min_tokens:
            break
    return out


@pytest.mark.parametrize(
    "params",
    [
        SamplingParams(temperature=0, max_tokens=10, presence_penalty=1.5, frequency_penalty=0.7),
        SamplingParams(temperature=0, max_tokens=10, repetition_penalty=1.8),
        SamplingParams(
            temperature=0, max_tokens=10, logit_bias={7: 5.0, 300: -100.0}, frequency_penalty=-0.5
        ),
        SamplingParams(
            temperature=0, max_tokens=12, min_tokens=4, stop_token_ids=(9,), logit_bias={9: 100.0}
        ),
    ],
    ids=["presence-frequency", "repetition", "bias", "min-tokens"],
)
def test_penalties_bias_and_min_tokens_match_a_token_by_token_reference(
    tiny: TinyPair, params: SamplingParams
) -> None:
    done = run_to_completion(engine_for(tiny.ours, gpu_blocks=64), [request("p", PROMPT, params)])["p"]
    assert list(done.token_ids) == reference_greedy(tiny, params, set(params.stop_token_ids))


def test_min_tokens_holds_back_a_stop_token_until_enough_were_generated(tiny: TinyPair) -> None:
    params = SamplingParams(
        temperature=0, max_tokens=12, min_tokens=4, stop_token_ids=(9,), logit_bias={9: 100.0}
    )
    done = run_to_completion(engine_for(tiny.ours, gpu_blocks=64), [request("m", PROMPT, params)])["m"]
    assert len(done.token_ids) == 5
    assert done.token_ids[-1] == 9
    assert 9 not in done.token_ids[:4]


def test_processing_is_batched_and_touches_only_the_rows_that_ask() -> None:
    logits = torch.randn(3, 10, generator=torch.Generator().manual_seed(1))
    history = TokenHistory([1, 2], 10, torch.device("cpu"), repeat=True)
    for token in (3, 3, 4):
        history.add(token)
    params = SamplingParams(presence_penalty=1.0, frequency_penalty=0.5, repetition_penalty=2.0,
                            logit_bias={0: 3.0})  # fmt: skip
    rows = [Processing(SamplingParams(), None), Processing(params, history, blocked=(5,)),
            Processing(SamplingParams(), None, blocked=(6,))]  # fmt: skip
    out = process(logits, rows)
    assert torch.equal(out[0], logits[0])
    expected = logits[1].clone()
    for token in (1, 2, 3, 4):
        v = expected[token]
        expected[token] = v / 2 if v > 0 else v * 2
    expected[3] -= 0.5 * 2 + 1.0
    expected[4] -= 0.5 + 1.0
    expected[0] += 3.0
    expected[5] = float("-inf")
    assert torch.allclose(out[1], expected)
    assert out[2, 6] == float("-inf")
    assert torch.equal(out[2, :6], logits[2, :6])
