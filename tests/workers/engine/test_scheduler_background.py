"""Background sequences (cache warm-ups) in the scheduler: they take only what a step leaves, never
keep another sequence waiting, and are preempted first. Same plans as ``test_scheduler``: (request id,
cached tokens, new tokens, needs logits) per sequence; blocks hold 4 tokens."""

from __future__ import annotations

from kvgate.workers.engine import Scheduler, SeqStatus, Sequence
from kvgate.workers.engine.stats import tokens_to_prefill
from tests.workers.engine.helpers import request
from tests.workers.engine.test_scheduler import FACTORY, SAMPLING, add, scheduler, step


def warm(sched: Scheduler, request_id: str, num_tokens: int, first: int = 0) -> Sequence:
    """Queues a background sequence whose prompt is ``num_tokens`` ids counting up from ``first``."""
    seq = FACTORY.build(request(request_id, range(first, first + num_tokens), SAMPLING, background=True))
    sched.add(seq)
    return seq


def test_a_background_prefill_takes_what_the_step_leaves() -> None:
    sched = scheduler(32, max_tokens_per_step=8)
    warm(sched, "w", 20)
    add(sched, "a", 3, first=100)  # queued after the warm-up, served before it
    assert step(sched) == [("a", 0, 3, True), ("w", 0, 5, False)]
    assert step(sched) == [("a", 3, 1, True), ("w", 5, 7, False)]


def test_a_new_sequence_overtakes_a_running_background_prefill() -> None:
    sched = scheduler(32, max_tokens_per_step=8)
    warm(sched, "w", 20)
    assert step(sched) == [("w", 0, 8, False)]
    add(sched, "b", 6, first=100)
    assert step(sched) == [("b", 0, 6, True), ("w", 8, 2, False)]
    assert step(sched) == [("b", 6, 1, True), ("w", 10, 7, False)]


def test_no_background_work_while_another_sequence_waits() -> None:
    sched = scheduler(32, max_tokens_per_step=8, max_num_seqs=1)
    add(sched, "a", 3)
    assert step(sched) == [("a", 0, 3, True)]
    b, w = add(sched, "b", 3, first=100), warm(sched, "w", 4, first=200)
    assert step(sched) == [("a", 3, 1, True)]  # b waits for a seat: the warm-up may not take it
    assert b.status is SeqStatus.WAITING
    assert w.status is SeqStatus.WAITING
    assert list(sched.waiting_background) == [w]


def test_a_warm_up_that_fits_waits_behind_a_sequence_that_does_not() -> None:
    sched = scheduler(4)
    add(sched, "a", 8)
    assert step(sched) == [("a", 0, 8, True)]  # 2 blocks
    add(sched, "big", 12, first=100)
    w = warm(sched, "w", 3, first=200)
    assert step(sched) == [("a", 8, 1, True)]  # big needs 3 of the 1 block left; w would fit in it
    assert w.status is SeqStatus.WAITING


def first_preempted(background: bool) -> tuple[str, list[str], Scheduler]:
    """Runs an older sequence (a warm-up if ``background``) and a newer one over 6 blocks until a
    step preempts: (who was preempted, who ran in that step, the scheduler)."""
    sched = scheduler(6)  # 24 slots
    (warm if background else add)(sched, "old", 7)
    step(sched)
    add(sched, "new", 5, first=100)
    while not (out := sched.schedule()).preempted:
        sched.kv.end_step()
        for item in out.items:
            item.seq.append(7)
            sched.kv.append_tokens(item.seq.seq_id, [7])
    (victim,) = out.preempted
    return victim.request_id, [i.seq.request_id for i in out.items], sched


def test_a_background_sequence_is_preempted_before_a_newer_one() -> None:
    assert first_preempted(background=False)[:2] == ("new", ["old"])  # the newest goes, as usual
    victim, ran, sched = first_preempted(background=True)
    assert (victim, ran) == ("old", ["new"])  # the warm-up goes, though older
    assert [s.request_id for s in sched.waiting_background] == ["old"]
    assert not sched.waiting


def test_abort_drops_a_waiting_background_sequence() -> None:
    sched = scheduler(8, max_num_seqs=1)
    add(sched, "a", 3)
    w = warm(sched, "w", 4, first=100)
    assert len(sched) == 2
    sched.abort(w)
    sched.abort(w)  # idempotent
    assert len(sched) == 1
    assert not sched.waiting_background


def test_the_queued_prefill_leaves_out_a_warm_up_but_counts_its_chunks_as_computed() -> None:
    sched = scheduler(32, max_tokens_per_step=8)
    warm(sched, "w", 24)
    step(sched)  # 8 of the warm-up's 24 tokens computed: 16 left, not counted
    b = add(sched, "b", 20)  # shares the warm-up's first 16 tokens (2 chunks of 8)
    assert tokens_to_prefill(sched.waiting, sched.running, sched.kv) == 20 - 16
    assert tokens_to_prefill([b], [], sched.kv) == 20 - 8  # without it: the one computed chunk


def test_a_request_that_starts_with_a_warm_up_promotes_it_and_reuses_its_blocks() -> None:
    sched = scheduler(32, max_tokens_per_step=8)
    w = warm(sched, "w", 16)
    assert step(sched) == [("w", 0, 8, False)]
    add(sched, "b", 20)  # starts with the warm-up's 16 tokens: the warm-up goes first now
    assert not w.background
    assert step(sched) == [("w", 8, 8, True)]
    assert step(sched)[1] == ("b", 16, 4, True)


def test_a_request_that_does_not_share_the_warm_up_overtakes_it() -> None:
    sched = scheduler(32, max_tokens_per_step=8)
    w = warm(sched, "w", 16)
    step(sched)
    add(sched, "b", 20, first=100)
    assert w.background
    assert step(sched) == [("b", 0, 8, False)]


def test_a_waiting_warm_up_that_a_request_shares_joins_the_queue_ahead_of_it() -> None:
    sched = scheduler(32, max_tokens_per_step=8)
    add(sched, "a", 20)
    w = warm(sched, "w", 16, first=200)
    assert step(sched) == [("a", 0, 8, False)]
    b = add(sched, "b", 20, first=200)
    assert list(sched.waiting) == [w, b]
    assert not sched.waiting_background
