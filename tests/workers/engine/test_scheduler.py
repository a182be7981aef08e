"""The scheduler over a real block manager, without a model: each step's plan, sequence by sequence, as
(request id, cached tokens, new tokens, needs logits). Blocks hold 4 tokens; a "step" ends the manager's
step and appends token 7 to every sequence that got logits, as the engine would after sampling."""

from __future__ import annotations

import torch

from kvgate.common.clock import ManualClock
from kvgate.proto.ids import Epoch
from kvgate.proto.sampling import SamplingParams
from kvgate.workers.engine import Scheduler, SchedulingLimits, SeqStatus, Sequence
from kvgate.workers.engine.intake import SequenceFactory
from kvgate.workers.kv import KVCacheConfig, KVCacheManager, StepEventPublisher
from tests.workers.engine.helpers import TINY_CACHE, WORKER, request

Plan = list[tuple[str, int, int, bool]]
FACTORY = SequenceFactory(TINY_CACHE, 1000, 1000, frozenset(), 300.0, torch.device("cpu"))
SAMPLING = SamplingParams(temperature=0, max_tokens=1000)


def scheduler(gpu_blocks: int, **limits: int) -> Scheduler:
    kv = KVCacheManager(KVCacheConfig(gpu_blocks, block_size=4, chunk_size=8), ManualClock(),
                        StepEventPublisher(WORKER, Epoch(1)))  # fmt: skip
    return Scheduler(SchedulingLimits(**limits), kv)


def add(sched: Scheduler, request_id: str, num_tokens: int, first: int = 0) -> Sequence:
    """Queues a sequence whose prompt is ``num_tokens`` ids counting up from ``first``."""
    seq = FACTORY.build(request(request_id, range(first, first + num_tokens), SAMPLING))
    sched.add(seq)
    return seq


def step(sched: Scheduler) -> Plan:
    out = sched.schedule()
    sched.kv.end_step()
    for item in out.items:
        if item.work.needs_logits:
            item.seq.append(7)
            sched.kv.append_tokens(item.seq.seq_id, [7])
    return [(i.seq.request_id, i.work.num_cached, i.work.num_new, i.work.needs_logits) for i in out.items]


def test_a_long_prompt_is_prefilled_in_chunks() -> None:
    sched = scheduler(16, max_tokens_per_step=16, max_prefill_tokens_per_step=6)
    add(sched, "a", 15)
    assert step(sched) == [("a", 0, 6, False)]
    assert step(sched) == [("a", 6, 6, False)]
    assert step(sched) == [("a", 12, 3, True)]  # the last chunk: its logits give the first token
    assert step(sched) == [("a", 15, 1, True)]  # then a decode


def test_decodes_come_first_and_prefills_take_what_is_left_of_the_budget() -> None:
    sched = scheduler(32, max_tokens_per_step=8)
    add(sched, "a", 3), add(sched, "b", 3, first=100), add(sched, "c", 20, first=200)
    assert step(sched) == [("a", 0, 3, True), ("b", 0, 3, True), ("c", 0, 2, False)]
    assert step(sched) == [("a", 3, 1, True), ("b", 3, 1, True), ("c", 2, 6, False)]
    assert step(sched) == [("a", 4, 1, True), ("b", 4, 1, True), ("c", 8, 6, False)]
    assert step(sched) == [("a", 5, 1, True), ("b", 5, 1, True), ("c", 14, 6, True)]


def test_at_most_max_num_seqs_run() -> None:
    sched = scheduler(32, max_num_seqs=2)
    a, _, c = add(sched, "a", 3), add(sched, "b", 3, first=100), add(sched, "c", 3, first=200)
    assert step(sched) == [("a", 0, 3, True), ("b", 0, 3, True)]
    assert c.status is SeqStatus.WAITING
    sched.finish(a)
    assert step(sched) == [("b", 3, 1, True), ("c", 0, 3, True)]


def test_the_newest_sequence_is_preempted_and_recomputes_from_its_cached_blocks() -> None:
    sched = scheduler(6)  # 24 slots
    a, b = add(sched, "a", 7), add(sched, "b", 7, first=100)
    assert step(sched) == [("a", 0, 7, True), ("b", 0, 7, True)]  # a: blocks 0-1, b: blocks 2-3
    for n in range(7, 12):  # a and b fill 3 blocks each: all 6 are in use
        assert step(sched) == [("a", n, 1, True), ("b", n, 1, True)]
    # a's 13th token needs a 4th block: b, the newest, is preempted (its blocks stay cached) and
    # queued first; nothing is admitted in a step that preempted.
    out = sched.schedule()
    assert [(i.seq, i.work.num_cached, i.work.num_new) for i in out.items] == [(a, 12, 1)]
    assert out.preempted == (b,)
    assert b.status is SeqStatus.PREEMPTED
    assert list(sched.waiting) == [b]
    assert b.prompt.token_ids.tolist() == [*range(100, 107), *[7] * 6]  # prompt and output so far
    assert sched.num_preemptions == 1
    sched.kv.end_step()
    sched.finish(a)
    # a's 4th block was b's tail block (evicted first, least recently used): b recomputes from its 2
    # remaining cached blocks and prefills the other 5 tokens.
    assert step(sched) == [("b", 8, 5, True)]
    assert b.output_ids == [7] * 7  # the recompute's logits gave b's next token


def test_a_sequence_preempts_itself_when_it_is_the_newest() -> None:
    sched = scheduler(4)
    add(sched, "a", 6), add(sched, "b", 8, first=100)
    assert step(sched) == [("a", 0, 6, True), ("b", 0, 8, True)]  # all 4 blocks in use
    out = sched.schedule()  # b's 9th token needs a 3rd block; b is the newest, so it goes itself
    assert [(i.seq.request_id, i.work.num_new) for i in out.items] == [("a", 1)]
    assert [s.request_id for s in out.preempted] == ["b"]


def test_no_overtaking_when_the_first_waiting_sequence_does_not_fit() -> None:
    sched = scheduler(4)
    add(sched, "a", 8)
    assert step(sched) == [("a", 0, 8, True)]  # 2 blocks
    add(sched, "big", 12, first=100), add(sched, "small", 3, first=200)
    assert step(sched) == [("a", 8, 1, True)]  # a takes a 3rd block; big needs 3 of the 1 left
    assert [s.request_id for s in sched.waiting] == ["big", "small"]


def test_abort_frees_a_running_sequence_and_drops_a_waiting_one() -> None:
    sched = scheduler(4, max_num_seqs=1)
    a, b = add(sched, "a", 5), add(sched, "b", 5, first=100)
    step(sched)
    assert sched.kv.gpu_pool.num_free == 2
    sched.abort(a)
    sched.abort(b)
    sched.abort(b)  # idempotent
    assert len(sched) == 0
    assert sched.kv.seq_ids() == []
    assert sched.kv.gpu_pool.num_free == 4
    assert step(sched) == []
