"""The prompt's own log-probabilities (completions' ``echo`` with ``logprobs``) on the tiny model, against
its ``transformers`` twin: every prompt token after the first is scored, whether the prompt is prefilled
in one step or in chunks, whether its prefix was cached before (such a request computes its whole
prompt, reports no cached token, and still caches what it computed), and after a preemption."""

from __future__ import annotations

import pytest
import torch

from kvgate.proto.sampling import SamplingParams, TokenLogprob
from kvgate.workers.engine import LLMEngine, SchedulingLimits, StepOutput, run_to_completion
from kvgate.workers.model import ScheduledSequence
from tests.workers.engine.conftest import TinyPair
from tests.workers.engine.helpers import assert_no_leak, engine_for, greedy, random_ids, request

PROMPT = random_ids(23, seed=81)  # 5 full blocks of 4 and 3 tokens more
SCORED = SamplingParams(temperature=0, max_tokens=3, prompt_logprobs=3)


def expected_rows(tiny: TinyPair, ids: list[int]) -> torch.Tensor:
    """``[len(ids), V]``: the twin's log-softmax after each token of ``ids`` (fp32)."""
    with torch.inference_mode():
        return torch.log_softmax(tiny.hf(torch.tensor([ids])).logits[0].float(), dim=-1)


def run(engine: LLMEngine, request_id: str, params: SamplingParams = SCORED) -> list[StepOutput]:
    engine.add_request(request(request_id, PROMPT, params))
    outputs = []
    while engine.has_work():
        outputs += [out for out in engine.step() if out.request_id == request_id]
    return outputs


def assert_scores(tiny: TinyPair, scores: tuple[TokenLogprob, ...], top: int = 3) -> None:
    rows = expected_rows(tiny, PROMPT)
    assert len(scores) == len(PROMPT) - 1  # the first token has none
    for position, lp in enumerate(scores):
        row, token = rows[position], PROMPT[position + 1]  # position p predicts token p + 1
        assert lp.logprob == pytest.approx(row[token].item(), abs=1e-4)
        values, ids = row.topk(top)
        assert [t for t, _ in lp.top] == ids.tolist()
        assert [v for _, v in lp.top] == pytest.approx(values.tolist(), abs=1e-4)


def test_prompt_logprobs_are_the_models_log_softmax_and_come_once(tiny: TinyPair) -> None:
    engine = engine_for(tiny.ours, gpu_blocks=64)
    outputs = run(engine, "a")
    assert [len(out.prompt_logprobs) > 0 for out in outputs] == [True, False, False]  # the first only
    assert_scores(tiny, outputs[0].prompt_logprobs)
    plain = run_to_completion(engine_for(tiny.ours, gpu_blocks=64), [request("b", PROMPT, greedy(3))])
    assert [t for out in outputs for t in out.new_token_ids] == list(plain["b"].token_ids)
    assert_no_leak(engine)


def test_a_chunked_prefill_scores_every_position(tiny: TinyPair) -> None:
    limits = SchedulingLimits(max_prefill_tokens_per_step=5)  # 23 tokens over 5 steps
    engine = engine_for(tiny.ours, gpu_blocks=64, limits=limits)
    computed: list[int] = []
    forward = engine.runner.forward
    engine.runner.forward = lambda work, ids: computed.append(len(ids)) or forward(work, ids)  # type: ignore[method-assign]
    outputs = run(engine, "c")
    assert computed[:5] == [5, 5, 5, 5, 3]
    assert_scores(tiny, outputs[0].prompt_logprobs)


def test_a_cached_prefix_is_computed_again_and_stays_cached(tiny: TinyPair) -> None:
    engine = engine_for(tiny.ours, gpu_blocks=64)
    first = run(engine, "warm", greedy(2))[-1]
    assert first.usage is not None
    assert first.usage.cached_tokens == 0
    scored = run(engine, "scored", SamplingParams(temperature=0, max_tokens=2, prompt_logprobs=0))
    assert scored[-1].usage is not None
    assert scored[-1].usage.cached_tokens == 0  # no cached block gives logits: all 23 computed
    assert_scores(tiny, scored[0].prompt_logprobs, top=0)
    again = run(engine, "again", greedy(2))[-1]
    assert again.usage is not None
    assert again.usage.cached_tokens == 20
    assert_no_leak(engine)


def test_n_choices_score_the_prompt_once(tiny: TinyPair) -> None:
    engine = engine_for(tiny.ours, gpu_blocks=64)
    params = SamplingParams(temperature=1.0, seed=4, max_tokens=2, n=3, prompt_logprobs=1)
    outputs = run(engine, "n", params)
    with_scores = [out for out in outputs if out.prompt_logprobs]
    assert [out.index for out in with_scores] == [0]
    assert_scores(tiny, with_scores[0].prompt_logprobs, top=1)
    assert_no_leak(engine)


def test_a_preempted_prompt_is_scored_once_in_full(tiny: TinyPair) -> None:
    # 9 blocks of 4 do not hold the decoding "hog" and the scored prompt together: the prompt, newer,
    # is preempted in its prefill (scored up to position 20 of 22) and recomputed from position 0.
    limits = SchedulingLimits(max_prefill_tokens_per_step=4)
    engine = engine_for(tiny.ours, gpu_blocks=9, limits=limits)
    engine.add_request(request("hog", random_ids(9, seed=3), greedy(16)))
    engine.step()
    computed: list[int] = []  # where each prefill chunk of the scored prompt started
    forward = engine.runner.forward

    def recording(work: list[ScheduledSequence], ids: list[int]) -> torch.Tensor:
        computed.extend(w.num_cached for w in work if w.all_logits)
        return forward(work, ids)

    engine.runner.forward = recording  # type: ignore[method-assign]
    outputs = run(engine, "p")
    assert engine.scheduler.num_preemptions >= 1
    assert computed.count(0) >= 2  # its prefill started again from the first position
    assert_scores(tiny, outputs[0].prompt_logprobs)
    assert_no_leak(engine)
