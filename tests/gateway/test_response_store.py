"""The in-memory response store's own bounds: a TTL on a clock the test moves, counts and bytes over
all tenants, one tenant's share; the oldest go first. (What every store does is in
``test_response_store_suite.py``.)"""

from __future__ import annotations

from kvgate.gateway.conversations import MemoryResponseStore, ResponseStoreSettings, StoredResponse
from tests.support.fake_clock import FakeMonotonic


def response(rid: str, text: str = "hello") -> StoredResponse:
    turns = ({"role": "user", "content": text}, {"role": "assistant", "content": "hi"})
    return StoredResponse({"id": rid, "object": "response"}, turns)


def store(clock: FakeMonotonic, **bounds: float) -> MemoryResponseStore:
    return MemoryResponseStore(ResponseStoreSettings(**bounds), clock)  # type: ignore[arg-type]


async def test_deletes_give_their_bytes_back() -> None:
    kept = store(FakeMonotonic())
    await kept.put("acme", response("resp_1"))
    assert await kept.delete("acme", "resp_1") is True
    assert await kept.get("acme", "resp_1") is None
    assert await kept.delete("acme", "resp_1") is False
    assert (len(kept), kept.nbytes) == (0, 0)


async def test_a_response_expires_after_the_ttl_and_is_dropped_by_a_later_put() -> None:
    clock = FakeMonotonic()
    kept = store(clock, ttl_s=60)
    await kept.put("acme", response("resp_old"))
    clock.now = 59
    assert await kept.get("acme", "resp_old") is not None
    clock.now = 61
    assert await kept.get("acme", "resp_old") is None
    await kept.put("acme", response("resp_new"))
    assert len(kept) == 1


async def test_the_oldest_go_first_past_the_count_and_byte_bounds() -> None:
    clock = FakeMonotonic()
    kept = store(clock, max_responses=2)
    for i in range(3):
        clock.now = i
        await kept.put(f"t{i}", response(f"resp_{i}"))
    assert [await kept.get(f"t{i}", f"resp_{i}") is not None for i in range(3)] == [False, True, True]
    one = response("resp_a").nbytes
    small = store(clock, max_bytes=2 * one + 1)
    for rid in ("resp_a", "resp_b", "resp_c"):
        await small.put("acme", response(rid))
    assert await small.get("acme", "resp_a") is None
    assert small.nbytes == 2 * one
    await small.put("acme", response("resp_huge", "x" * 3 * one))  # larger than the whole bound: not kept
    assert await small.get("acme", "resp_huge") is None
    assert await small.get("acme", "resp_c") is not None


async def test_one_tenant_cannot_push_out_another_past_its_own_share() -> None:
    kept = store(FakeMonotonic(), max_per_tenant=2)
    await kept.put("beta", response("resp_beta"))
    for i in range(5):
        await kept.put("acme", response(f"resp_{i}"))
    assert await kept.get("beta", "resp_beta") is not None
    assert [await kept.get("acme", f"resp_{i}") is not None for i in range(5)] == [False] * 3 + [True] * 2
