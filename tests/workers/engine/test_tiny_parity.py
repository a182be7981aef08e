"""The engine, not a harness, generates exactly ``transformers``' greedy tokens with a tiny random Llama
(safetensors, blocks of 4 tokens, chunks of 8): cold, with a prefix served from the GPU tier, with one
served from the CPU tier, batched, and with a chunked prefill."""

from __future__ import annotations

from collections.abc import Callable

from kvgate.workers.engine import SchedulingLimits, run_to_completion
from tests.workers.engine.conftest import TinyPair
from tests.workers.engine.helpers import assert_no_leak, engine_for, greedy, random_ids, request

N = 12  # new tokens per request
PREFIX = random_ids(24, seed=100)  # 6 full blocks shared by A and B
A = [*PREFIX, 1, *random_ids(4, seed=101)]  # 29 tokens
B = [*PREFIX, 2, *random_ids(6, seed=102)]  # 31 tokens: differs from A right after the prefix

Greedy = Callable[[list[int], int], list[int]]


def test_cold_prompts_alone(tiny: TinyPair, tiny_greedy: Greedy) -> None:
    engine = engine_for(tiny.ours, gpu_blocks=32)
    for i, prompt in enumerate([random_ids(9, seed=1), random_ids(21, seed=2)]):
        done = run_to_completion(engine, [request(f"r{i}", prompt)])[f"r{i}"]
        assert list(done.token_ids) == tiny_greedy(prompt, N)
        assert done.usage.cached_tokens == 0
    assert_no_leak(engine)


def test_prefix_from_the_gpu_tier(tiny: TinyPair, tiny_greedy: Greedy) -> None:
    engine = engine_for(tiny.ours, gpu_blocks=32)
    first = run_to_completion(engine, [request("a", A)])["a"]
    second = run_to_completion(engine, [request("b", B)])["b"]
    assert (second.usage.cached_gpu_tokens, second.usage.cached_cpu_tokens) == (24, 0)  # the 6 prefix blocks
    assert list(first.token_ids) == tiny_greedy(A, N)
    assert list(second.token_ids) == tiny_greedy(B, N)
    assert_no_leak(engine)


def test_prefix_from_the_cpu_tier(tiny: TinyPair, tiny_greedy: Greedy) -> None:
    # 16 GPU blocks (64 slots): a 63-token filler needs all of them, so A's 7 cached blocks move to the CPU.
    engine = engine_for(tiny.ours, gpu_blocks=16, cpu_blocks=32)
    run_to_completion(engine, [request("a", A, greedy(1))])
    run_to_completion(engine, [request("filler", random_ids(63, seed=103), greedy(1))])
    assert engine.kv_counters().offloaded == 7
    second = run_to_completion(engine, [request("b", B)])["b"]
    assert (second.usage.cached_gpu_tokens, second.usage.cached_cpu_tokens) == (0, 24)
    assert engine.kv_counters().swapped_in == 6
    assert list(second.token_ids) == tiny_greedy(B, N)
    assert_no_leak(engine)


def test_sequences_of_different_lengths_batched(tiny: TinyPair, tiny_greedy: Greedy) -> None:
    prompts = [random_ids(n, seed=10 + n) for n in (5, 17, 30, 11)]
    engine = engine_for(tiny.ours, gpu_blocks=64)
    done = run_to_completion(engine, [request(f"r{i}", p) for i, p in enumerate(prompts)])
    assert engine.counters().steps == N  # one prefill step for all four, then 11 batched decode steps
    for i, prompt in enumerate(prompts):
        assert list(done[f"r{i}"].token_ids) == tiny_greedy(prompt, N)
    assert_no_leak(engine)


def test_chunked_prefill_beside_decodes(tiny: TinyPair, tiny_greedy: Greedy) -> None:
    long, short = random_ids(45, seed=20), random_ids(6, seed=21)
    limits = SchedulingLimits(max_tokens_per_step=16, max_prefill_tokens_per_step=8)
    engine = engine_for(tiny.ours, gpu_blocks=64, limits=limits)
    done = run_to_completion(engine, [request("short", short), request("long", long)])
    assert list(done["short"].token_ids) == tiny_greedy(short, N)
    assert list(done["long"].token_ids) == tiny_greedy(long, N)
    assert_no_leak(engine)
