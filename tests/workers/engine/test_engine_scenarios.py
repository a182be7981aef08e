"""Engine scenarios with the tiny model: preemption with unchanged greedy output and no leaked block,
aborts at the step boundary, load figures, KV waste, counters, and requests the engine refuses."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from kvgate.proto.sampling import FinishReason, SamplingParams, Usage
from kvgate.proto.workers import WorkerLoad
from kvgate.workers.engine import KVWaste, SchedulingLimits, run_to_completion
from tests.workers.engine.conftest import TinyPair
from tests.workers.engine.helpers import assert_no_leak, engine_for, greedy, random_ids, request

Greedy = Callable[[list[int], int], list[int]]


def test_preempted_sequences_recompute_and_finish_with_the_same_greedy_tokens(
    tiny: TinyPair, tiny_greedy: Greedy
) -> None:
    prompts = [random_ids(n, seed=30 + n) for n in (10, 12, 14)]  # 30, 32, 34 tokens at the end: 25 blocks
    engine = engine_for(tiny.ours, gpu_blocks=12)  # 48 slots
    done = run_to_completion(engine, [request(f"r{i}", p, greedy(20)) for i, p in enumerate(prompts)])
    assert engine.counters().preemptions == 3
    for i, prompt in enumerate(prompts):
        assert list(done[f"r{i}"].token_ids) == tiny_greedy(prompt, 20)
        assert done[f"r{i}"].usage.completion_tokens == 20
    assert_no_leak(engine)


def test_abort_of_a_running_and_a_waiting_request_frees_their_blocks_at_the_next_step(tiny: TinyPair) -> None:
    engine = engine_for(tiny.ours, gpu_blocks=16, limits=SchedulingLimits(max_num_seqs=1))
    engine.add_request(request("a", random_ids(10, seed=1), greedy(50)))
    engine.add_request(request("b", random_ids(7, seed=2), greedy(50)))
    engine.step(), engine.step()  # a: prefill, then one decode; b waits
    assert engine.abort("a")
    assert engine.abort("b")
    assert not engine.abort("unknown")
    assert engine.kv.gpu_pool.num_free == 13  # nothing is freed before the step boundary
    outputs = engine.step()
    assert [(o.request_id, o.new_token_ids, o.finish_reason) for o in outputs] == [
        ("a", (), FinishReason.ABORT),
        ("b", (), FinishReason.ABORT),
    ]
    assert outputs[0].usage == Usage(prompt_tokens=10, completion_tokens=2)
    assert outputs[1].usage == Usage(prompt_tokens=7)
    assert outputs[1].timings.ttft_s is None
    assert not engine.abort("a")  # finished: nothing to abort
    assert engine.counters().finished_abort == 2
    assert_no_leak(engine)


def test_queued_requests_sharing_a_prefix_count_it_once_in_the_load(tiny: TinyPair) -> None:
    """Three requests share a new 16-token (2-chunk) prefix; one runs at a time. Once the first has
    taken the prefix, the two waiting behind it count only their own 5 tokens each: the engine will
    reuse the prefix, so a gateway must not see three prompts' worth of queue."""
    engine = engine_for(tiny.ours, gpu_blocks=32, limits=SchedulingLimits(max_num_seqs=1))
    prefix = random_ids(16, seed=3)
    for name, seed in (("a", 4), ("b", 5), ("c", 6)):
        engine.add_request(request(name, prefix + random_ids(5, seed=seed)))
    assert engine.load().waiting_prefill_tokens == 3 * 21  # not taken yet: every token counts
    engine.step()  # a prefills all 21 tokens and samples its first one
    load = engine.load()
    assert (load.running_seqs, load.waiting_seqs) == (1, 2)
    assert load.waiting_prefill_tokens == 5 + 5
    while engine.has_work():
        engine.step()
    engine.add_request(request("d", random_ids(21, seed=9)))  # nothing in common
    engine.step()  # d runs
    engine.add_request(request("e", prefix + random_ids(9, seed=8)))
    engine.add_request(request("f", random_ids(21, seed=10)))
    engine.step()  # e and f wait behind d; e's prefix is still cached from a, b and c
    assert engine.load().waiting_prefill_tokens == 9 + 21


def test_load_and_kv_waste(tiny: TinyPair) -> None:
    engine = engine_for(tiny.ours, gpu_blocks=16, cpu_blocks=8, limits=SchedulingLimits(max_num_seqs=1))
    engine.add_request(request("a", random_ids(10, seed=1)))
    engine.add_request(request("b", random_ids(7, seed=2)))
    assert engine.has_work()
    assert engine.load() == WorkerLoad(17, 0, 2, 16, 16, 8, 8)  # both queued, not taken yet
    engine.step()  # a prefills its 10 tokens into 3 blocks (12 slots) and samples its first token
    assert engine.load() == WorkerLoad(7, 1, 1, 16, 13, 8, 8)
    assert engine.kv_waste() == KVWaste(allocated_slots=12, unused_slots=2)
    assert engine.kv_waste().fraction == pytest.approx(2 / 12)


def test_counters_add_up_prompt_cached_and_predicted_tokens(tiny: TinyPair) -> None:
    prefix = random_ids(24, seed=100)
    engine = engine_for(tiny.ours, gpu_blocks=32)
    run_to_completion(engine, [request("a", [*prefix, 1, 2, 3])])
    run_to_completion(engine, [request("b", [*prefix, 4, 5], predicted_cached_tokens=16)])
    counters = engine.counters()
    assert (counters.requests, counters.prompt_tokens, counters.completion_tokens) == (2, 53, 24)
    assert (counters.cached_tokens, counters.cached_gpu_tokens, counters.cached_cpu_tokens) == (24, 24, 0)
    assert (counters.predicted_cached_tokens, counters.actual_cached_tokens_of_predicted) == (16, 24)
    assert counters.finished_length == 2
    assert engine.kv_counters().offloaded == 0


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"adapter_id": "lora-1"}, r"LoRA adapter .lora-1. is not loaded on this worker \(loaded: none\)"),
        ({"prompt": random_ids(48, seed=1)}, "at most 48 tokens"),
        ({"prompt": [1, 2, 320]}, "vocab size 320"),
        ({"sampling": SamplingParams(stop=("x",))}, "need a tokenizer"),
    ],
)
def test_requests_that_cannot_run_are_refused(tiny: TinyPair, kwargs: dict, message: str) -> None:
    engine = engine_for(tiny.ours, gpu_blocks=12)  # 48 slots: sequences of at most 48 tokens
    prompt = kwargs.pop("prompt", [1, 2, 3])
    with pytest.raises(ValueError, match=message):
        engine.add_request(request("r", prompt, **kwargs))
    assert not engine.has_work()


def test_a_request_id_in_flight_is_refused_and_free_again_once_finished(tiny: TinyPair) -> None:
    engine = engine_for(tiny.ours, gpu_blocks=12)
    engine.add_request(request("r", [1, 2, 3], greedy(1)))
    with pytest.raises(ValueError, match="already in flight"):
        engine.add_request(request("r", [4, 5, 6]))
    assert engine.step()[0].finished
    engine.add_request(request("r", [4, 5, 6], greedy(1)))
