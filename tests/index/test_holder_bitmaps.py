"""The holder bitmaps against a plain per-worker reference, on random holdings over many slots."""

from __future__ import annotations

import random

import pytest

from kvgate.index.holders import HolderBitmaps
from kvgate.index.types import Cohort
from kvgate.proto.ids import Tier, WorkerId
from tests.index.helpers import chain

CHAIN = chain(*range(40))


def _reference(held: dict, pending: dict, live: set[int], now: int) -> dict[str, str]:
    """Per live slot, the tiers of its leading chunks: a holding, else a pending hint, else the end."""
    found = {}
    for slot in live:
        run = []
        for chunk in CHAIN:
            tier, expires = held.get((slot, chunk), ("", 0))
            if expires > now:
                run.append(tier)
            elif pending.get((slot, chunk), 0) > now:
                run.append(Tier.PENDING.value)
            else:
                break
        if run:
            found[f"w{slot}"] = "".join(run)
    return found


@pytest.mark.parametrize("seed", range(8))
def test_the_walk_matches_a_per_worker_reference(seed: int) -> None:
    rng = random.Random(seed)
    slots = rng.randint(1, 130)  # past one and two machine words of bits
    bitmaps, held, pending = HolderBitmaps(), {}, {}
    for slot in range(slots):
        depth = rng.randint(0, len(CHAIN))
        for i, chunk in enumerate(CHAIN[:depth]):
            if rng.random() < 0.08:
                continue  # a hole: this worker's run ends here
            tier = Tier.CPU if rng.random() < 0.2 else Tier.GPU
            expires = rng.choice((50, 150, 10**6)) + i
            bitmaps.hold(slot, chunk, tier, expires)
            held[(slot, chunk)] = (tier.value, expires)
        if rng.random() < 0.3:
            start = rng.randint(0, len(CHAIN) - 1)
            hinted = CHAIN[start : start + rng.randint(1, 10)]
            bitmaps.add_pending(slot, hinted, 120)
            pending.update({(slot, c): 120 for c in hinted})
        if rng.random() < 0.1:
            evicted = rng.choice(CHAIN)
            bitmaps.drop(slot, evicted)
            held.pop((slot, evicted), None)
    live = {s for s in range(slots) if rng.random() < 0.9}
    names = [WorkerId(f"w{s}") for s in range(slots)]
    for now in (0, 100, 140, 200):
        bitmaps.expire(now)
        walked = bitmaps.walk(CHAIN, sum(1 << s for s in live), names)
        assert {w: c.tiers for c in walked for w in c.workers} == _reference(held, pending, live, now)


def test_clearing_a_slot_forgets_all_it_held_and_memory_follows_what_is_live() -> None:
    bitmaps = HolderBitmaps()
    for round_ in range(20):  # fresh chunks that each expire before the next round
        for chunk in chain(*range(round_ * 500, round_ * 500 + 500)):
            bitmaps.hold(0, chunk, Tier.GPU, round_ * 10 + 5)
        bitmaps.expire(round_ * 10 + 9)
        assert bitmaps.chunks == 0
    assert len(bitmaps._deadlines) <= 2 * 1024 + 500  # stale deadlines are compacted away
    bitmaps.hold(3, CHAIN[0], Tier.CPU, 10**9)
    assert bitmaps.clear(3) == 1
    assert bitmaps.walk(CHAIN, 1 << 3, [WorkerId("")] * 3 + [WorkerId("w3")]) == ()


def test_a_refreshed_holding_outlives_its_first_deadline() -> None:
    bitmaps = HolderBitmaps()
    bitmaps.hold(0, CHAIN[0], Tier.GPU, 50)
    bitmaps.hold(0, CHAIN[0], Tier.CPU, 500)  # TTL refreshed (and offloaded) before the first lapsed
    bitmaps.expire(100)
    assert bitmaps.walk(CHAIN, 1, [WorkerId("w0")]) == (Cohort("C", (WorkerId("w0"),)),)
    bitmaps.expire(500)
    assert bitmaps.walk(CHAIN, 1, [WorkerId("w0")]) == ()
