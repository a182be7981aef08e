"""Continuous batching with a token budget, chunked prefill and recompute preemption (vLLM v1 style).

One step, decided by :meth:`Scheduler.schedule`:

1. **Running sequences first**, oldest first: a decoding one computes its 1 new token, one still in
   prefill the next chunk of its prompt (at most ``max_prefill_tokens_per_step`` tokens and what is
   left of the step's budget). When the GPU lacks a block for one, the **newest** running sequence is
   preempted (its blocks freed, its full blocks staying cached) and put at the front of the waiting
   queue, until the allocation fits or the sequence itself was the one preempted.
2. **Then waiting sequences**, first come first served, while the budget and ``max_num_seqs`` allow and
   no sequence was preempted in this step: each is admitted with its cached prefix
   (``KVCacheManager.admit``; none for a prompt whose log-probabilities are asked for, see
   ``prompt_logprobs``) and prefills at most one chunk. The first that does not fit stops the
   walk (no overtaking: a long prompt is never starved by short ones).

A preempted sequence is recomputed on readmission: its prompt becomes prompt + output so far, most of
which is usually still cached, so greedy output is unchanged.

**Background sequences** (:attr:`EngineRequest.background`: cache warm-ups) wait in a queue of their
own and take only what a step leaves: they run after steps 1 and 2, and only once no other sequence
waits. They sit after every other sequence in the running batch, so they are the first preempted; a
waiting sequence is never kept out by one (the budget a background prefill would take goes to it).
A new sequence whose prompt starts with a background sequence's prompt promotes it to an ordinary
one (ahead of the new one, which then reuses its blocks instead of computing them beside it).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from kvgate.workers.engine.config import SchedulingLimits
from kvgate.workers.engine.sequence import SeqStatus, Sequence
from kvgate.workers.kv import KVCacheManager
from kvgate.workers.model import ScheduledSequence


@dataclass(frozen=True, slots=True)
class ScheduledItem:
    """One sequence's work in a step: ``work.num_new`` tokens after ``work.num_cached`` cached ones."""

    seq: Sequence
    work: ScheduledSequence


@dataclass(frozen=True, slots=True)
class SchedulerOutput:
    """A step's plan: ``items`` in batch order; ``admitted``: sequences admitted for the first time
    (their ``cached`` was just set); ``preempted``: sequences sent back to the waiting queue."""

    items: tuple[ScheduledItem, ...]
    admitted: tuple[Sequence, ...]
    preempted: tuple[Sequence, ...]

    @property
    def num_tokens(self) -> int:
        return sum(item.work.num_new for item in self.items)


class Scheduler:
    """The waiting queue and the running batch over one :class:`KVCacheManager` (shared with the engine,
    which calls the manager's ``end_step``, ``append_tokens`` and ``expire``)."""

    def __init__(self, limits: SchedulingLimits, kv: KVCacheManager) -> None:
        self.limits = limits
        self.kv = kv
        self.waiting: deque[Sequence] = deque()
        self.waiting_background: deque[Sequence] = deque()
        self.running: list[Sequence] = []  # every other sequence before the background ones
        self.num_preemptions = 0

    def __len__(self) -> int:
        """Sequences waiting or running."""
        return len(self.waiting) + len(self.waiting_background) + len(self.running)

    def add(self, seq: Sequence) -> None:
        """Queues a new sequence last (of the background queue for a background one). A background
        sequence whose prompt the new one starts with is promoted first: it keeps its place among
        the others, ahead of the new one, which then reuses what it computes."""
        if not seq.background:
            self._promote_shared(seq)
        self._queue(seq).append(seq)

    def _promote_shared(self, seq: Sequence) -> None:
        hashes = seq.prompt.chunk_hashes
        for other in [*self.running[self._first_background() :], *self.waiting_background]:
            warm = other.prompt.chunk_hashes
            if not warm or len(hashes) < len(warm) or hashes[len(warm) - 1] != warm[-1]:
                continue
            if other in self.running:
                self.running.remove(other)
                other.promoted = True
                self.running.insert(self._first_background(), other)
            else:
                self.waiting_background.remove(other)
                other.promoted = True
                self.waiting.append(other)

    def add_fork(self, seq: Sequence) -> None:
        """Queues a fork of a running request first: admitted next, it finds the prompt's full blocks
        cached (the request's choice 0 holds them) and computes only the rest."""
        self.waiting.appendleft(seq)

    def schedule(self) -> SchedulerOutput:
        """Picks this step's work and gets its slots (see the module docstring). Call once per step,
        before ``kv.end_step()``; mutates the queues and the manager."""
        items: list[ScheduledItem] = []
        admitted: list[Sequence] = []
        preempted = self._schedule_running(items, self._left(items), background=False)
        if not preempted:
            self._schedule_waiting(self.waiting, items, admitted, self._left(items))
        if not preempted and not self.waiting:  # what is left of the step is the background's
            preempted = self._schedule_running(items, self._left(items), background=True)
            if not preempted:
                self._schedule_waiting(self.waiting_background, items, admitted, self._left(items))
        return SchedulerOutput(tuple(items), tuple(admitted), tuple(preempted))

    def _left(self, items: list[ScheduledItem]) -> int:
        return self.limits.max_tokens_per_step - sum(item.work.num_new for item in items)

    def _queue(self, seq: Sequence) -> deque[Sequence]:
        return self.waiting_background if seq.background else self.waiting

    def _first_background(self) -> int:
        """Where the running batch's background sequences start (its length when none runs)."""
        return next((i for i, seq in enumerate(self.running) if seq.background), len(self.running))

    def finish(self, seq: Sequence) -> None:
        """Drops finished ``seq`` from the batch and frees its blocks (call after ``kv.end_step()``)."""
        self.running.remove(seq)
        self.kv.free(seq.seq_id)

    def abort(self, seq: Sequence) -> None:
        """Drops ``seq`` wherever it is and frees its blocks, if any. Call at a step boundary (before
        :meth:`schedule`); idempotent."""
        if seq in (queue := self._queue(seq)):
            queue.remove(seq)
        if seq in self.running:
            self.running.remove(seq)
        self.kv.abort(seq.seq_id)

    def _schedule_running(self, items: list[ScheduledItem], budget: int, background: bool) -> list[Sequence]:
        """The running sequences of one kind (``background`` or not), oldest first."""
        preempted: list[Sequence] = []
        index = self._first_background() if background else 0
        while index < len(self.running) and budget > 0:
            seq = self.running[index]
            if seq.background != background:
                break
            num_cached = self.kv.num_computed_tokens(seq.seq_id)
            num_new = min(seq.num_tokens - num_cached, budget, self._chunk_cap(seq, num_cached))
            if not self._allocate(seq, num_new, preempted):
                break  # seq itself was preempted: nothing older is left to run
            items.append(self._item(seq, num_cached, num_new))
            budget -= num_new
            index += 1
        return preempted

    def _chunk_cap(self, seq: Sequence, num_cached: int) -> int:
        # A decode (one token left) is never capped; a prefill chunk is.
        left = seq.num_tokens - num_cached
        return left if left == 1 else self.limits.max_prefill_tokens_per_step

    def _allocate(self, seq: Sequence, num_new: int, preempted: list[Sequence]) -> bool:
        """Slots for ``seq``, preempting the newest running sequences until they fit; False when
        ``seq`` itself had to go."""
        while self.kv.allocate_slots(seq.seq_id, num_new) is None:
            victim = self.running.pop()
            self._preempt(victim)
            preempted.append(victim)
            if victim is seq:
                return False
        return True

    def _preempt(self, seq: Sequence) -> None:
        self.kv.free(seq.seq_id)
        seq.status = SeqStatus.PREEMPTED
        seq.rebuild_prompt(self.kv.config.block_size, self.kv.config.chunk_size)
        self._queue(seq).appendleft(seq)
        self.num_preemptions += 1

    def _schedule_waiting(
        self, waiting: deque[Sequence], items: list[ScheduledItem], admitted: list[Sequence], budget: int
    ) -> None:
        """Admits from the front of ``waiting`` (one kind's queue) while the step allows."""
        while waiting and budget > 0 and len(self.running) < self.limits.max_num_seqs:
            seq = waiting[0]
            cap = min(budget, self.limits.max_prefill_tokens_per_step)
            admission = self.kv.admit(seq.seq_id, seq.prompt, cap, seq.pin, reuse=not seq.needs_prompt_logits)
            if admission is None:
                return
            waiting.popleft()
            self.running.insert(len(self.running) if seq.background else self._first_background(), seq)
            seq.status = SeqStatus.RUNNING
            if seq.cached is None:
                seq.cached = admission.cached
                admitted.append(seq)
            items.append(self._item(seq, admission.cached.total, admission.num_new_tokens))
            budget -= admission.num_new_tokens

    def _item(self, seq: Sequence, num_cached: int, num_new: int) -> ScheduledItem:
        table = self.kv.block_table(seq.seq_id)
        needs_logits = num_cached + num_new == seq.num_tokens
        adapter, every_row = seq.request.adapter_id, seq.needs_prompt_logits
        work = ScheduledSequence(table, num_cached, num_new, needs_logits, adapter, every_row)
        return ScheduledItem(seq, work)
