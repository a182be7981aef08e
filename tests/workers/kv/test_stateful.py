"""Hypothesis drives the manager through random admissions (fresh, shared and revisited prompts, with
and without pins), chunked prefill, decode, frees, steps, memory pressure and the passing of time.
After every rule the pools must be intact, the published chunk states must equal a recomputation from
the pools, and a model of the KV contents (the engine running every copy plan) must match every
cached block."""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, settings, target
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from kvgate.workers.kv import Pin, SeqId
from tests.workers.kv.helpers import (
    IndexView,
    PoolModel,
    check_integrity,
    holdings_from_pools,
    pool_state,
    prompt,
    rig,
)

BS, CS = 2, 4  # tiny blocks and a 3-token vocabulary: prefixes collide (legitimately) all the time
VOCAB = st.integers(0, 2)
MAX_LIVE, MAX_PROMPT = 3, 12  # so that admissions mostly fit the 16 GPU blocks
PINS = st.none() | st.builds(Pin, tokens=st.integers(0, 12), ttl_s=st.sampled_from([600.0, 3600.0]))


class KVMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.rig = rig(gpu=10, cpu=12, bs=BS, cs=CS)
        self.kv = self.rig.kv
        self.view = IndexView(self.rig.publisher)
        self.engine = PoolModel(self.kv)
        self.tokens: dict[SeqId, list[int]] = {}  # every known token of each live sequence
        self.history: list[list[int]] = []  # prompts admitted so far, to revisit
        self.scheduled: set[SeqId] = set()  # got slots in the current step
        self.admitted = 0
        self.fresh = 1000  # next never-used token id

    def idle(self) -> list[SeqId]:
        """Live sequences without slots in the current step (the ones a scheduler may touch)."""
        return sorted(set(self.tokens) - self.scheduled)

    def try_admit(self, tokens: list[int], budget: int, pin: Pin | None) -> None:
        tokens = tokens[:MAX_PROMPT]
        seq_id = SeqId(f"s{self.admitted}")
        self.admitted += 1
        p = prompt(tokens, bs=BS, cs=CS)
        predicted, before = self.kv.lookup(p), pool_state(self.kv)
        admission = self.kv.admit(seq_id, p, budget, pin)
        if admission is None:
            assert pool_state(self.kv) == before, "a refused admission changed the pools"
            return
        assert admission.cached == predicted.cached
        assert admission.num_new_tokens == min(len(tokens) - admission.cached.total, budget)
        self.tokens[seq_id] = list(tokens)
        self.history.append(list(tokens))
        self.scheduled.add(seq_id)

    def can_admit(self) -> bool:
        return len(self.tokens) < MAX_LIVE

    @precondition(can_admit)
    @rule(data=st.data(), budget=st.integers(1, 12), pin=PINS)
    def admit(self, data: st.DataObject, budget: int, pin: Pin | None) -> None:
        base = data.draw(st.sampled_from(self.history)) if self.history and data.draw(st.booleans()) else []
        cut = data.draw(st.integers(0, len(base)))
        tokens = base[:cut] + data.draw(st.lists(VOCAB, max_size=8))
        self.try_admit(tokens or [0], budget, pin)

    @precondition(lambda self: self.tokens and self.can_admit())
    @rule(data=st.data(), budget=st.integers(1, 12))
    def share(self, data: st.DataObject, budget: int) -> None:
        """A second sequence with a live one's tokens as its prefix."""
        seq_id = data.draw(st.sampled_from(sorted(self.tokens)))
        self.try_admit(self.tokens[seq_id] + data.draw(st.lists(VOCAB, max_size=4)), budget, None)

    @precondition(lambda self: self.idle())
    @rule(data=st.data())
    def allocate(self, data: st.DataObject) -> None:
        """More prefill, or one decode token."""
        seq_id = data.draw(st.sampled_from(self.idle()))
        todo = len(self.tokens[seq_id]) - self.kv.num_computed_tokens(seq_id)
        if todo == 0:
            token = data.draw(VOCAB)
            self.kv.append_tokens(seq_id, [token])
            self.tokens[seq_id].append(token)
            todo = 1
        before = pool_state(self.kv)
        if self.kv.allocate_slots(seq_id, data.draw(st.integers(1, todo))) is None:
            assert pool_state(self.kv) == before, "a refused allocation changed the pools"
        else:
            self.scheduled.add(seq_id)

    @precondition(lambda self: self.idle())
    @rule(data=st.data())
    def free(self, data: st.DataObject) -> None:
        seq_id = data.draw(st.sampled_from(self.idle()))
        assert self.kv.free(seq_id)
        assert not self.kv.free(seq_id)
        del self.tokens[seq_id]

    @rule()
    def step(self) -> None:
        self.engine.step()
        self.scheduled.clear()

    @rule(seconds=st.sampled_from([0, 1, 30, 150, 301, 3601]))
    def expire(self, seconds: int) -> None:
        self.rig.clock.advance(seconds)
        now, pools = self.rig.now_ms, (self.kv.gpu_pool, self.kv.cpu_pool)
        due = {id(b) for p in pools for _, b in p.cached_items() if b.ref_cnt == 0 and b.expires_at_ms <= now}
        assert self.kv.expire() == len(due)
        assert not due & {id(b) for p in pools for _, b in p.cached_items()}, "an expired block survived"

    @precondition(can_admit)
    @rule(data=st.data())
    def pressure(self, data: st.DataObject) -> None:
        """A prompt of fresh tokens taking free GPU blocks: cached ones are evicted (offloaded)."""
        if self.kv.gpu_pool.num_free:
            count = data.draw(st.integers(1, self.kv.gpu_pool.num_free)) * BS
            self.try_admit(list(range(self.fresh, self.fresh + count)), count, None)
            self.fresh += count

    @precondition(lambda self: self.history and self.can_admit())
    @rule(data=st.data())
    def revisit(self, data: st.DataObject) -> None:
        """An earlier prompt again: hits on the GPU, or on the CPU tier (swapped in)."""
        self.try_admit(data.draw(st.sampled_from(self.history)), 12, None)

    @rule()
    def resync(self) -> None:
        self.kv.flush_events()
        self.view.resync()

    def teardown(self) -> None:
        # Steer generation towards runs that move blocks both ways and overflow the CPU tier too.
        target(float(self.kv.counters.swapped_in), label="swap-ins")
        target(float(self.kv.counters.evicted_pressure), label="pressure drops")

    @invariant()
    def pools_are_intact(self) -> None:
        check_integrity(self.kv)

    @invariant()
    def published_chunks_match_the_pools(self) -> None:
        self.kv.flush_events()
        self.view.drain()
        assert self.view.held == holdings_from_pools(self.kv)
        # The tracker forgets a chunk once its last block is gone (no leak in a long-running worker).
        ends = [b for p in (self.kv.gpu_pool, self.kv.cpu_pool) for _, b in p.cached_items() if b.key.chunk]
        assert len(self.kv.chunks) == len(ends)

    @invariant()
    def tables_hold_their_sequences_tokens(self) -> None:
        for seq_id, tokens in self.tokens.items():
            table = [self.kv.gpu_pool.blocks[i] for i in self.kv.block_table(seq_id)]
            assert len(table) == -(-self.kv.num_computed_tokens(seq_id) // BS)
            for index, block in enumerate(table):
                own = np.array(tokens[index * BS : (index + 1) * BS], "<u4").tobytes()
                assert block.key is None or block.key.tokens == own, f"{seq_id} reuses a wrong block"


KVMachine.TestCase.settings = settings(
    max_examples=150, stateful_step_count=60, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
TestKVManager = KVMachine.TestCase
