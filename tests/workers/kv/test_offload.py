"""CPU offload and swap-in: pressure moves unexpired blocks to the CPU tier, a later hit brings them
back with a copy plan instead of recomputing; tiers are exclusive; plans are valid within a step."""

from __future__ import annotations

from kvgate.proto.ids import Tier
from kvgate.workers.kv import Admission, CachedTokens, CopyPlan, Pin
from tests.workers.kv.helpers import PoolModel, S, check_integrity, ids, prompt, rig


def test_pressure_offloads_and_a_hit_swaps_back_in() -> None:
    r = rig(gpu=4, cpu=4)
    r.kv.admit(S("a"), prompt(ids(0, 9)), 100)  # GPU 0, 1 full; 2 partial
    r.kv.end_step()
    r.kv.free(S("a"))
    assert r.gpu() == ([3, 2], [1, 0])
    # b needs 4 blocks: the empty 3 and 2, then a's blocks, tail first, which move to CPU 0 and 1.
    assert r.kv.admit(S("b"), prompt(ids(100, 13)), 100).block_table == (3, 2, 1, 0)
    assert r.kv.end_step() == CopyPlan(offload=((1, 0), (0, 1)), swap_in=())
    assert r.cpu() == ([2, 3], [0, 1])
    assert r.kv.lookup(prompt(ids(0, 9))).blocks == ((Tier.CPU, 1), (Tier.CPU, 0))
    r.kv.free(S("b"))
    assert r.gpu() == ([0], [1, 2, 3])
    # a again: both blocks come back from the CPU. GPU 0 is empty; GPU 1 and 2 are b's, evicted
    # (offloaded to CPU 2 and 3) for the second swap-in and the block of the last token.
    a = r.kv.admit(S("a2"), prompt(ids(0, 9)), 100)
    assert a == Admission((0, 1, 2), CachedTokens(cpu=8), 1, swap_in=((1, 0), (0, 1)))
    assert r.cpu() == ([], [2, 3])  # CPU 1 and 0 stay reserved until the plan is handed out
    assert r.kv.end_step() == CopyPlan(offload=((1, 2), (2, 3)), swap_in=((1, 0), (0, 1)))
    assert r.cpu() == ([1, 0], [2, 3])
    assert r.kv.cached_tokens(S("a2")) == CachedTokens(cpu=8)
    assert (r.kv.counters.offloaded, r.kv.counters.swapped_in) == (4, 2)
    check_integrity(r.kv)


def test_a_block_offloaded_and_swapped_back_within_one_step() -> None:
    r = rig(gpu=3, cpu=3)
    engine = PoolModel(r.kv)
    for name, start in (("x", 0), ("y", 100), ("z", 200)):  # one full block each: GPU 0, 1, 2
        r.kv.admit(S(name), prompt(ids(start, 4)), 100)
    engine.step()
    for name in "xyz":
        r.kv.free(S(name))
    # b evicts x's block to CPU 0; c, in the same step, hits it there and swaps it into GPU 1 (y's,
    # offloaded to CPU 1); c's last token takes GPU 2 (z's, offloaded to CPU 2).
    assert r.kv.admit(S("b"), prompt(ids(300, 4)), 100).block_table == (0,)
    assert r.kv.admit(S("c"), prompt(ids(0, 5)), 100).swap_in == ((0, 1),)
    # Offloads run first, so the swap-in reads x's block from CPU 0 after it arrived there
    # (engine.step checks every cached block's content).
    assert engine.step() == CopyPlan(offload=((0, 0), (1, 1), (2, 2)), swap_in=((0, 1),))
    assert engine.gpu[1] == prompt(ids(0, 4)).block_hashes[0]
    check_integrity(r.kv)


def test_expired_blocks_are_dropped_not_offloaded() -> None:
    r = rig(gpu=2, cpu=2)
    r.kv.admit(S("a"), prompt(ids(0, 8)), 100)
    r.kv.end_step()
    r.kv.free(S("a"))
    r.clock.advance(300)
    assert r.kv.expire() == 2
    assert r.cpu() == ([0, 1], [])
    assert r.kv.end_step().empty


def test_a_copy_dropped_before_the_step_ran_is_not_planned() -> None:
    r = rig(gpu=1, cpu=1)
    r.kv.admit(S("a"), prompt(ids(0, 4)), 100)
    r.kv.end_step()
    r.kv.free(S("a"))
    r.kv.admit(S("b"), prompt(ids(100, 4)), 100)  # offloads a's block: GPU 0 -> CPU 0
    r.clock.advance(300)
    assert r.kv.expire() == 1  # the CPU copy expires before the step runs: the copy is moot
    assert r.kv.end_step().empty
    assert r.cpu() == ([0], [])


def test_without_a_cpu_tier_pressure_drops() -> None:
    r = rig(gpu=2, cpu=0)
    r.kv.admit(S("a"), prompt(ids(0, 8)), 100)
    r.kv.end_step()
    r.kv.free(S("a"))
    assert r.kv.admit(S("b"), prompt(ids(100, 8)), 100).block_table == (1, 0)
    assert r.kv.end_step().empty
    assert r.kv.counters.evicted_pressure == 2


def test_cpu_pressure_drops_the_cpu_lru_and_its_planned_copy() -> None:
    r = rig(gpu=3, cpu=1)
    r.kv.admit(S("a"), prompt(ids(0, 9)), 100)
    r.kv.end_step()
    r.kv.free(S("a"))
    # b evicts a's block 1 (to CPU 0), then a's block 0, which needs CPU 0 again: block 1's copy is
    # dropped, and so is its planned copy (a CPU block is the destination of one copy per plan).
    assert r.kv.admit(S("b"), prompt(ids(100, 9)), 100).block_table == (2, 1, 0)
    assert r.kv.end_step() == CopyPlan(offload=((0, 0),))
    assert (r.kv.counters.offloaded, r.kv.counters.evicted_pressure) == (2, 1)
    # The head of a's chain survived: a later a hits it on the CPU.
    assert r.kv.lookup(prompt(ids(0, 9))).blocks == ((Tier.CPU, 0),)
    check_integrity(r.kv)


def test_recomputing_a_block_on_the_gpu_drops_its_cpu_copy() -> None:
    r = rig(gpu=3, cpu=2)
    r.kv.admit(S("a"), prompt(ids(0, 8)), 100, pin=Pin(8, 3600))
    r.kv.end_step()
    r.kv.free(S("a"))
    r.kv.admit(S("b"), prompt(ids(100, 12)), 100)  # a's blocks 1 and 0 go to CPU 0 and 1
    r.kv.end_step()
    r.kv.free(S("b"))
    r.clock.advance(301)  # b's blocks expire; a's pinned ones do not
    # a again: block 0 is swapped in; block 1 holds the last token, so it is recomputed on the GPU,
    # and its CPU copy (CPU 0) is dropped: a hash lives in one tier only.
    a = r.kv.admit(S("a2"), prompt(ids(0, 8)), 100)
    assert a == Admission((0, 1), CachedTokens(cpu=4), 4, swap_in=((1, 0),))
    assert r.cpu() == ([0], [])
    assert r.kv.end_step() == CopyPlan(swap_in=((1, 0),))
    assert r.cpu() == ([0, 1], [])
    check_integrity(r.kv)
