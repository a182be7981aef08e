"""Behaviour only the in-process backend has: memory stays bounded by what is live."""

from __future__ import annotations

from kvgate.common.clock import ManualClock
from kvgate.index import MemoryPrefixIndex
from tests.index.conftest import make_settings
from tests.index.helpers import LOAD, A, batch, chain, info, stored


async def test_expired_entries_are_swept_so_memory_stays_bounded() -> None:
    clock = ManualClock()
    index = MemoryPrefixIndex(make_settings(), clock)
    await index.register(info(A), LOAD)
    for seq in range(1, 11):  # 10 rounds of 500 fresh chunks, each expiring after 1 s
        hashes = chain(*range(seq * 1000, seq * 1000 + 500))
        await index.apply(batch(A, seq, *stored(hashes, clock.now_ms() + 1000)))
        clock.advance(2)
    # 5,000 chunks were stored, but at most the live round plus one sweep interval remain.
    assert index.size <= 2 * 1024
    assert (await index.lookup(chain(*range(1000, 1500)))).matches == {}
