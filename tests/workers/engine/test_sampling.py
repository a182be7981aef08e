"""Sampling: seeded output does not depend on the batch it runs in, top-k=1 is greedy, and the top-k /
top-p filter keeps exactly the tokens it should."""

from __future__ import annotations

from collections.abc import Callable

import torch

from kvgate.proto.sampling import SamplingParams
from kvgate.workers.engine import run_to_completion
from kvgate.workers.engine.sampler import sample, top_k_top_p
from tests.workers.engine.conftest import TinyPair
from tests.workers.engine.helpers import engine_for, greedy, random_ids, request

PROMPT = random_ids(11, seed=50)
SEEDED = SamplingParams(temperature=0.9, top_p=0.95, top_k=50, seed=1234, max_tokens=12)
Greedy = Callable[[list[int], int], list[int]]


def test_seeded_sampling_is_the_same_alone_batched_and_joining_a_running_batch(tiny: TinyPair) -> None:
    alone = run_to_completion(engine_for(tiny.ours, gpu_blocks=64), [request("s", PROMPT, SEEDED)])
    others = [
        request("g", random_ids(20, seed=51), greedy(12)),
        request("o", random_ids(5, seed=52), SamplingParams(temperature=1.0, seed=99, max_tokens=12)),
    ]
    batched = run_to_completion(engine_for(tiny.ours, gpu_blocks=64), [*others, request("s", PROMPT, SEEDED)])
    late_engine = engine_for(tiny.ours, gpu_blocks=64)
    for r in others:
        late_engine.add_request(r)
    late_engine.step(), late_engine.step()  # the others are decoding when s arrives
    late = run_to_completion(late_engine, [request("s", PROMPT, SEEDED)])
    assert alone["s"].token_ids == batched["s"].token_ids == late["s"].token_ids
    reseeded = SamplingParams(temperature=0.9, top_p=0.95, top_k=50, seed=4321, max_tokens=12)
    other_seed = run_to_completion(engine_for(tiny.ours, gpu_blocks=64), [request("s", PROMPT, reseeded)])
    assert other_seed["s"].token_ids != alone["s"].token_ids


def test_top_k_1_is_greedy(tiny: TinyPair, tiny_greedy: Greedy) -> None:
    engine = engine_for(tiny.ours, gpu_blocks=64)
    params = SamplingParams(temperature=1.5, top_k=1, max_tokens=12)
    done = run_to_completion(engine, [request("k", PROMPT, params)])
    assert list(done["k"].token_ids) == tiny_greedy(PROMPT, 12)


def test_top_k_and_top_p_keep_exactly_the_expected_tokens() -> None:
    logits = torch.log(torch.tensor([[0.1, 0.2, 0.3, 0.4], [0.1, 0.2, 0.3, 0.4], [0.05, 0.05, 0.5, 0.4]]))
    kept = top_k_top_p(logits, torch.tensor([2, 0, 0]), torch.tensor([1.0, 0.65, 0.5])).isfinite()
    assert kept.tolist() == [
        [False, False, True, True],  # top-2
        [False, False, True, True],  # 0.4 + 0.3 >= 0.65
        [False, False, True, False],  # 0.5 alone reaches 0.5
    ]


def test_greedy_rows_draw_nothing_and_sampled_rows_follow_their_generator() -> None:
    logits = torch.randn(3, 50, generator=torch.Generator().manual_seed(0))
    params = [SamplingParams(temperature=0), SamplingParams(temperature=1.0), SamplingParams(temperature=1.0)]

    def draw() -> list[int]:
        generators = [None, torch.Generator().manual_seed(7), torch.Generator().manual_seed(8)]
        return sample(logits, params, generators)

    first = draw()
    assert first[0] == int(logits[0].argmax())
    assert draw() == first
    assert sample(logits[1:2], params[1:2], [torch.Generator().manual_seed(7)]) == first[1:2]
