"""The prefix index contract, run against every backend (in-process memory and real Redis)."""

from __future__ import annotations

import dataclasses

import pytest

from kvgate.index import ApplyStatus, DuplicateWorkerError, StaleEpochError
from kvgate.index.settings import MAX_PENDING_WAIT_S
from kvgate.proto.events import Holding, KVEvent
from kvgate.proto.ids import Epoch, Tier, WorkerId
from kvgate.proto.workers import WorkerLoad
from tests.index.conftest import Backend
from tests.index.helpers import LOAD, A, B, C, batch, chain, chunk, info, snapshot, stored

LONG = 10**15  # an expiry far in the future


async def register(b: Backend, *workers: WorkerId, epoch: int = 1) -> None:
    for worker in workers:
        await b.index.register(info(worker, epoch), LOAD)


async def test_empty_index_matches_nothing(backend: Backend) -> None:
    await register(backend, A)
    result = await backend.index.lookup(chain(0, 1, 2))
    assert result.num_chunks == 3
    assert result.matches == {}
    assert result.longest == 0


async def test_lookup_counts_leading_chunks_per_worker_and_stops_at_first_miss(backend: Backend) -> None:
    await register(backend, A, B, C)
    # A holds chunks 0,1,2; B holds 0,1 and 3 (3 is after its first miss); C holds 1,2 but not 0.
    await backend.index.apply(batch(A, 1, *stored(chain(0, 1, 2), LONG)))
    await backend.index.apply(batch(B, 1, *stored(chain(0, 1, 3), LONG)))
    await backend.index.apply(batch(C, 1, *stored(chain(1, 2), LONG)))

    result = await backend.index.lookup(chain(0, 1, 2, 3))

    assert {w: m.chunks for w, m in result.matches.items()} == {A: 3, B: 2}
    assert result.chunks_for(C) == 0
    assert result.matches[A].tiers == "GGG"
    assert result.longest == 3


async def test_lookup_of_a_long_chain(backend: Backend) -> None:
    """300 chunks (a 38k-token prompt): A holds them all, B the first 257 in the CPU tier."""
    await register(backend, A, B)
    hashes = chain(*range(300))
    await backend.index.apply(batch(A, 1, *stored(hashes, LONG)))
    await backend.index.apply(batch(B, 1, *stored(hashes[:257], LONG, Tier.CPU)))

    result = await backend.index.lookup(hashes)

    assert result.matches[A].chunks == 300
    assert result.matches[B].tiers == "C" * 257
    assert result.matches[B].cpu_chunks == 257


async def test_offload_moves_a_chunk_to_the_cpu_tier_and_evict_removes_it(backend: Backend) -> None:
    await register(backend, A)
    c0, c1, c2 = chain(0, 1, 2)
    await backend.index.apply(batch(A, 1, *stored([c0, c1, c2], LONG)))
    await backend.index.apply(batch(A, 2, KVEvent.offloaded(c1, LONG)))
    assert (await backend.index.lookup([c0, c1, c2])).matches[A].tiers == "GCG"

    await backend.index.apply(batch(A, 3, KVEvent.evicted(c1)))
    match = (await backend.index.lookup([c0, c1, c2])).matches[A]
    assert match.tiers == "G"  # chunk 2 is still held, but after the gap at chunk 1


async def test_swap_in_stores_the_chunk_back_in_the_gpu_tier(backend: Backend) -> None:
    await register(backend, A)
    c0 = chunk(0)
    await backend.index.apply(batch(A, 1, KVEvent.stored(c0, Tier.CPU, LONG)))
    await backend.index.apply(batch(A, 2, KVEvent.stored(c0, Tier.GPU, LONG)))
    assert (await backend.index.lookup([c0])).matches[A].tiers == "G"


async def test_cleared_drops_everything_the_worker_held(backend: Backend) -> None:
    await register(backend, A, B)
    hashes = chain(0, 1)
    await backend.index.apply(batch(A, 1, *stored(hashes, LONG)))
    await backend.index.apply(batch(B, 1, *stored(hashes, LONG)))
    await backend.index.apply(batch(A, 2, KVEvent.cleared(), *stored(chain(9), LONG)))

    assert set((await backend.index.lookup(hashes)).matches) == {B}
    assert (await backend.index.lookup(chain(9))).chunks_for(A) == 1


async def test_events_in_a_batch_apply_in_order(backend: Backend) -> None:
    await register(backend, A)
    c0, c1 = chain(0, 1)
    await backend.index.apply(
        batch(
            A,
            1,
            KVEvent.stored(c0, Tier.GPU, LONG),
            KVEvent.evicted(c0),
            KVEvent.evicted(c1),
            KVEvent.stored(c1, Tier.GPU, LONG),
        )
    )
    assert (await backend.index.lookup([c0])).matches == {}
    assert (await backend.index.lookup([c1])).chunks_for(A) == 1


async def test_expired_holdings_do_not_match_and_a_refresh_extends_them(backend: Backend) -> None:
    await register(backend, A, B)
    now = backend.clock.now_ms()
    hashes = chain(0, 1)
    await backend.index.apply(batch(A, 1, *stored(hashes, now + 5_000)))
    await backend.index.apply(batch(B, 1, *stored(hashes, now + 5_000)))
    await backend.index.apply(batch(B, 2, *stored(hashes[:1], now + 60_000)))  # B's chunk 0 hit again

    backend.clock.advance(6)
    await backend.index.heartbeat(A, Epoch(1), LOAD)
    await backend.index.heartbeat(B, Epoch(1), LOAD)
    result = await backend.index.lookup(hashes)

    assert A not in result.matches
    assert result.matches[B].chunks == 1


async def test_events_of_an_older_epoch_are_fenced(backend: Backend) -> None:
    await register(backend, A, epoch=1)
    await backend.index.apply(batch(A, 1, *stored(chain(0), LONG), epoch=1))

    await register(backend, A, epoch=2)  # A restarted: the old incarnation's blocks are gone
    assert (await backend.index.lookup(chain(0))).matches == {}

    late = await backend.index.apply(batch(A, 2, *stored(chain(0, 1), LONG), epoch=1))
    assert late.status is ApplyStatus.STALE_EPOCH
    assert (await backend.index.lookup(chain(0))).matches == {}

    fresh = await backend.index.apply(batch(A, 1, *stored(chain(5), LONG), epoch=2))
    assert fresh.ok
    with pytest.raises(StaleEpochError):
        await backend.index.register(info(A, 1), LOAD)


async def test_reregistering_the_same_epoch_is_idempotent(backend: Backend) -> None:
    await register(backend, A)
    await backend.index.apply(batch(A, 1, *stored(chain(0), LONG)))
    await register(backend, A)
    assert (await backend.index.lookup(chain(0))).chunks_for(A) == 1
    assert (await backend.index.apply(batch(A, 2, *stored(chain(1), LONG)))).ok


async def test_a_second_process_claiming_a_registered_id_and_epoch_is_refused(backend: Backend) -> None:
    await register(backend, A)
    await backend.index.apply(batch(A, 1, *stored(chain(0), LONG)))
    impostor = dataclasses.replace(info(A), address="127.0.0.1:6666")
    with pytest.raises(DuplicateWorkerError, match="two processes"):
        await backend.index.register(impostor, LOAD)
    (status,) = await backend.index.workers()
    assert status.info == info(A)  # the first one keeps the id, its address and what it holds
    assert (await backend.index.lookup(chain(0))).chunks_for(A) == 1


async def test_unknown_workers_and_future_epochs_are_refused(backend: Backend) -> None:
    refused = await backend.index.apply(batch(A, 1, *stored(chain(0), LONG)))
    assert refused.status is ApplyStatus.UNKNOWN_WORKER
    await register(backend, A, epoch=3)
    future = await backend.index.apply(batch(A, 1, *stored(chain(0), LONG), epoch=4))
    assert future.status is ApplyStatus.UNKNOWN_WORKER
    assert (await backend.index.lookup(chain(0))).matches == {}


async def test_a_sequence_gap_is_refused_until_a_snapshot_resyncs(backend: Backend) -> None:
    await register(backend, A)
    assert (await backend.index.apply(batch(A, 1, *stored(chain(0), LONG)))).expected_seq == 2

    gap = await backend.index.apply(batch(A, 3, *stored(chain(0, 1), LONG)))  # batch 2 was lost
    assert gap.status is ApplyStatus.GAP
    assert gap.expected_seq == 2
    assert (await backend.index.lookup(chain(0, 1))).chunks_for(A) == 1  # nothing of batch 3

    full = snapshot(A, 3, [Holding(chunk(0), Tier.GPU, LONG), Holding(chunk(1), Tier.CPU, LONG)])
    synced = await backend.index.resync(full)
    assert synced.ok
    assert synced.expected_seq == 4
    assert (await backend.index.lookup(chain(0, 1))).matches[A].tiers == "GC"
    assert (await backend.index.apply(batch(A, 4, KVEvent.evicted(chunk(1))))).ok


async def test_a_snapshot_replaces_all_previous_holdings(backend: Backend) -> None:
    await register(backend, A)
    await backend.index.apply(batch(A, 1, *stored(chain(0, 1), LONG)))
    await backend.index.resync(snapshot(A, 7, [Holding(chunk(5), Tier.GPU, LONG)]))
    assert (await backend.index.lookup(chain(0))).matches == {}
    assert (await backend.index.lookup(chain(5))).chunks_for(A) == 1
    stale = await backend.index.resync(snapshot(A, 8, [], epoch=0))
    assert stale.status is ApplyStatus.STALE_EPOCH


async def test_purge_drops_a_worker_in_one_call_until_it_resyncs(backend: Backend) -> None:
    await register(backend, A, B)
    hashes = chain(*range(40))
    await backend.index.apply(batch(A, 1, *stored(hashes, LONG)))
    await backend.index.apply(batch(B, 1, *stored(hashes[:10], LONG)))

    assert await backend.index.purge(A) == 40
    assert await backend.index.purge(A) == 0  # idempotent
    assert set((await backend.index.lookup(hashes)).matches) == {B}
    assert [w.info.worker_id for w in await backend.index.workers()] == [B]

    # A was alive after all: its next batch is a gap, it heartbeats and re-publishes its state.
    assert (await backend.index.apply(batch(A, 2, *stored(hashes, LONG)))).status is ApplyStatus.GAP
    assert await backend.index.heartbeat(A, Epoch(1), LOAD)
    await backend.index.resync(snapshot(A, 2, [Holding(h, Tier.GPU, LONG) for h in hashes]))
    assert (await backend.index.lookup(hashes)).chunks_for(A) == 40


async def test_a_worker_whose_heartbeat_lapses_drops_out(backend: Backend) -> None:
    await register(backend, A, B)
    await backend.index.apply(batch(A, 1, *stored(chain(0), LONG)))
    await backend.index.apply(batch(B, 1, *stored(chain(0), LONG)))

    backend.clock.advance(backend.settings.heartbeat_ttl_s / 2)
    assert await backend.index.heartbeat(B, Epoch(1), LOAD)
    assert not await backend.index.heartbeat(B, Epoch(2), LOAD)  # not its epoch: refused
    backend.clock.advance(backend.settings.heartbeat_ttl_s / 2 + 0.001)

    assert set((await backend.index.lookup(chain(0))).matches) == {B}
    assert [w.info.worker_id for w in await backend.index.workers()] == [B]
    assert await backend.index.heartbeat(A, Epoch(1), LOAD)  # back: its holdings count again
    assert set((await backend.index.lookup(chain(0))).matches) == {A, B}


async def test_deregister_removes_the_worker_but_keeps_its_epoch_fenced(backend: Backend) -> None:
    await register(backend, A, epoch=2)
    await backend.index.apply(batch(A, 1, *stored(chain(0), LONG), epoch=2))
    await backend.index.deregister(A, Epoch(1))  # wrong epoch: no-op
    assert (await backend.index.lookup(chain(0))).chunks_for(A) == 1

    await backend.index.deregister(A, Epoch(2))
    assert await backend.index.workers() == []
    assert (await backend.index.lookup(chain(0))).matches == {}
    refused = await backend.index.apply(batch(A, 2, *stored(chain(0), LONG), epoch=2))
    assert refused.status is ApplyStatus.UNKNOWN_WORKER
    with pytest.raises(StaleEpochError):
        await backend.index.register(info(A, 1), LOAD)


async def test_workers_reports_registration_and_latest_load(backend: Backend) -> None:
    await register(backend, B, A)
    newer = WorkerLoad(
        waiting_prefill_tokens=9,
        running_seqs=1,
        gpu_blocks_total=10,
        gpu_blocks_free=1,
        cpu_blocks_total=40,
        cpu_blocks_free=30,
        gpu_blocks_cached=1,
        evicted_ttl_blocks=2,
        evicted_pressure_blocks=3,
        offloaded_blocks=4,
    )  # every field, so that each backend is seen to keep each
    await backend.index.heartbeat(A, Epoch(1), newer)

    statuses = await backend.index.workers()

    assert [s.info for s in statuses] == [info(A), info(B)]
    assert statuses[0].load == newer
    assert statuses[0].load.kv_usage == pytest.approx(0.9)
    assert statuses[1].load == LOAD
    deadline = backend.clock.now_ms() + backend.settings.heartbeat_ttl_s * 1000
    assert statuses[0].heartbeat_expires_ms == deadline


async def test_pending_entries_route_a_burst_until_they_expire(backend: Backend) -> None:
    await register(backend, A, B)
    hashes = chain(0, 1, 2)
    await backend.index.apply(batch(B, 1, *stored(hashes[:1], LONG)))
    await backend.index.add_pending(hashes, A)

    result = await backend.index.lookup(hashes)
    assert result.matches[A].tiers == "PPP"
    assert result.matches[A].pending_chunks == 3
    assert result.matches[B].tiers == "G"

    await backend.index.apply(batch(A, 1, *stored(hashes[:2], LONG)))  # real holdings beat pending
    assert (await backend.index.lookup(hashes)).matches[A].tiers == "GGP"

    backend.clock.advance(backend.settings.pending_ttl_s + 0.001)
    await register(backend, A, B)  # keep both live
    assert (await backend.index.lookup(hashes)).matches[A].tiers == "GG"


async def test_a_pending_entry_lasts_the_wait_its_request_is_expected_to_have(backend: Backend) -> None:
    """A prompt queued behind 5 s of work is still being computed there after ``pending_ttl_s``:
    its entries last the TTL after the wait (at most ``MAX_PENDING_WAIT_S``), on every gateway."""
    await register(backend, A, B)
    queued, stuck = chain(0, 1), chain(7, 8)
    await backend.index.add_pending(queued, A, wait_s=5.0)
    await backend.index.add_pending(stuck, B, wait_s=3600.0)
    backend.clock.advance(backend.settings.pending_ttl_s + 4.9)
    await register(backend, A, B)
    assert (await backend.index.lookup(queued)).matches[A].tiers == "PP"
    backend.clock.advance(0.2)
    assert (await backend.index.lookup(queued)).matches == {}
    backend.clock.advance(MAX_PENDING_WAIT_S - 5.0 - 0.2)
    await register(backend, A, B)
    assert (await backend.index.lookup(stuck)).matches[B].tiers == "PP"
    backend.clock.advance(0.1)
    assert (await backend.index.lookup(stuck)).matches == {}


async def test_a_shorter_hint_does_not_cut_a_longer_one(backend: Backend) -> None:
    """The router's hint (its estimated wait) and the worker's admission (its reported queue) may
    disagree: a chunk stays pending until the later of their deadlines."""
    await register(backend, A)
    hashes = chain(0, 1, 2)
    await backend.index.add_pending(hashes, A, wait_s=6.0)
    await backend.index.add_pending(hashes[1:], A)
    backend.clock.advance(backend.settings.pending_ttl_s + 3.0)
    await register(backend, A)
    assert (await backend.index.lookup(hashes)).matches[A].tiers == "PPP"


async def test_pending_entries_of_a_dead_worker_are_ignored(backend: Backend) -> None:
    await register(backend, A)
    await backend.index.add_pending(chain(0), B)  # B never registered
    await backend.index.add_pending(chain(0), A)
    await backend.index.purge(A)
    assert (await backend.index.lookup(chain(0))).matches == {}


async def test_empty_requests_are_answered_without_work(backend: Backend) -> None:
    await register(backend, A)
    assert (await backend.index.lookup([])).matches == {}
    await backend.index.add_pending([], A)
    assert (await backend.index.apply(batch(A, 1))).ok
