"""The gateway-local record of its own routing decisions."""

from __future__ import annotations

from kvgate.gateway.routing.local_pending import LocalPending
from kvgate.index.types import LookupResult, PrefixMatch
from kvgate.proto.ids import WorkerId
from tests.index.helpers import chain
from tests.support.fake_clock import FakeMonotonic

A, B = WorkerId("a"), WorkerId("b")


def test_recorded_chunks_extend_a_run_as_pending_and_expire() -> None:
    clock = FakeMonotonic(100.0)
    local = LocalPending(ttl_s=2, monotonic=clock)
    hashes = chain(0, 1, 2, 3)
    local.record(hashes[:3], A)
    index_view = LookupResult(4, {A: PrefixMatch(A, "G"), B: PrefixMatch(B, "GG")})

    merged = local.merge(index_view, hashes)
    assert merged.matches[A].tiers == "GPP"  # the index's G, then local pending up to chunk 2
    assert merged.matches[B].tiers == "GG"  # untouched

    clock.now += 2.5
    assert local.merge(index_view, hashes) == index_view
    local.record(chain(9), B)  # any record drops what expired
    assert len(local) == 1


def test_each_worker_keeps_its_own_pending_run_through_a_shared_opening() -> None:
    local = LocalPending(ttl_s=2, monotonic=FakeMonotonic(100.0))
    local.record(chain(0, 1), A)
    local.record(chain(0, 5), B)  # same first chunk, routed to B afterwards
    merged = local.merge(LookupResult(2, {}), chain(0, 1))
    assert {w: m.tiers for w, m in merged.matches.items()} == {A: "PP", B: "P"}


def test_an_entry_lasts_the_expected_wait_then_the_ttl() -> None:
    clock = FakeMonotonic(100.0)
    local = LocalPending(ttl_s=2, monotonic=clock)
    local.record(chain(0, 1), A, wait_s=10)
    clock.now += 11.5
    assert local.merge(LookupResult(2, {}), chain(0, 1)).matches[A].tiers == "PP"
    clock.now += 1
    assert local.merge(LookupResult(2, {}), chain(0, 1)).matches == {}


def test_a_long_expected_wait_is_capped_and_the_record_is_bounded() -> None:
    clock = FakeMonotonic(100.0)
    local = LocalPending(ttl_s=2, monotonic=clock, max_entries=3)
    local.record(chain(0, 1), A, wait_s=3_600)  # an hour's queue keeps it 30 s + the TTL, not an hour
    clock.now += 33
    assert local.merge(LookupResult(2, {}), chain(0, 1)).matches == {}
    local.record(chain(5, 6), B)
    local.record(chain(7, 8), B)  # 4 entries over the bound of 3: the oldest goes
    assert len(local) == 3
    assert local.merge(LookupResult(2, {}), chain(7, 8)).matches[B].tiers == "PP"
