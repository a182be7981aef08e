"""The record of recent requests stays within its bounds (count, bytes, per tenant, age) and answers
a tenant only about its own requests."""

from __future__ import annotations

import gc
import sys
import tracemalloc
import uuid
from dataclasses import replace

import numpy as np
import pytest

from kvgate.gateway.diagnosis import Cause, DiagnosisSettings
from kvgate.gateway.diagnosis.compare import compare
from kvgate.gateway.diagnosis.diagnose import Layout, diagnose
from kvgate.gateway.diagnosis.record import RequestRecord, RouteNote, Scope, WorkerMark
from kvgate.gateway.diagnosis.store import RecentRequests
from tests.gateway.diagnosis.records import SCOPE, record, tokens


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _memory(recent: RecentRequests) -> int:
    """The bytes the records really hold: the objects, their strings and arrays (records without a
    diagnosis: a diagnosis's share is measured by tracemalloc, in the byte-count test below)."""
    total = 0
    for tenant in recent.tenants():
        for r in recent.recent(tenant, 10**9):
            shape, scope = r.shape, r.scope
            parts = (r, r.request_id, r.tenant, scope, scope.salt, r.route, r.served, r.chunk_hashes, shape)
            arrays = (shape.marks, shape.anchors, shape.anchor_pos)
            total += sum(sys.getsizeof(p) for p in (*parts, *arrays))
    return total


@pytest.mark.slow
def test_100k_distinct_requests_stay_within_the_byte_and_count_caps() -> None:
    settings = DiagnosisSettings(max_requests=20_000, max_bytes=4 * 1024 * 1024, max_per_tenant=20_000)
    clock = Clock()
    recent = RecentRequests(settings, clock)
    rng = np.random.default_rng(0)
    peak_count = 0
    for i in range(100_000):
        ids = rng.integers(0, 49_000, int(rng.integers(20, 400)))
        recent.add(record(f"r{i}", ids, tenant=f"t{i % 50}", at_s=clock.now))
        peak_count = max(peak_count, len(recent))
        assert recent.nbytes <= settings.max_bytes
    assert peak_count <= settings.max_requests
    assert _memory(recent) <= recent.nbytes  # what the cap counts covers what the records really hold
    assert recent.get("t49", "r99999") is not None  # the newest are kept, the oldest went
    assert recent.get("t0", "r0") is None


def test_one_tenant_keeps_at_most_its_share() -> None:
    recent = RecentRequests(DiagnosisSettings(max_per_tenant=3), Clock())
    for i in range(5):
        recent.add(record(f"r{i}", tokens(50, i), tenant="a"))
    recent.add(record("other", tokens(50, 9), tenant="b"))
    assert [r.request_id for r in recent.recent("a", 10)] == ["r4", "r3", "r2"]
    assert recent.get("b", "other") is not None


def test_records_older_than_the_ttl_are_gone() -> None:
    clock = Clock()
    recent = RecentRequests(DiagnosisSettings(ttl_s=60), clock)
    recent.add(record("old", tokens(50, 1), at_s=clock.now))
    clock.now += 61
    assert recent.get("a", "old") is None
    assert recent.recent("a", 10) == []
    recent.add(record("new", tokens(50, 2), at_s=clock.now))
    assert len(recent) == 1  # the old one was dropped, not only hidden


def test_a_tenant_never_sees_another_tenants_request() -> None:
    recent = RecentRequests(DiagnosisSettings(), Clock())
    recent.add(record("r1", tokens(50, 1), tenant="a"))
    assert recent.get("b", "r1") is None
    assert recent.recent("b", 10) == []
    assert recent.get("a", "r1") is not None


PROMPT = tokens(900, seed=1)
EXCERPT = "Current time: 2025-06-01T12:34:56Z. You are"


def _variant(i: int) -> RequestRecord:
    """A request of one of six kinds, against an earlier ``PROMPT`` served by w0: evicted by TTL,
    changed content (with an excerpt), reordered, another salt, new, sent away from w0 for load."""
    rid = uuid.uuid4().hex
    kind = i % 6
    if kind == 1:
        return record(rid, np.concatenate([PROMPT[:300], [11, 22, 33], PROMPT[300:]]), cached=256)
    if kind == 2:
        return record(rid, np.concatenate([PROMPT[450:], PROMPT[:450]]))
    if kind == 3:
        return record(rid, PROMPT, scope=Scope(SCOPE.model, salt=SCOPE.salt + "\x1fexperiment"))
    if kind == 4:
        return record(rid, tokens(900, seed=100 + i))
    if kind == 5:
        return record(rid, PROMPT, route=RouteNote("w1", "load_override", 0, "w0", 896))
    return record(rid, PROMPT)


def test_the_byte_count_covers_what_records_and_their_diagnoses_really_hold() -> None:
    """Measured by tracemalloc: every allocation the recorded requests keep alive, their diagnoses'
    details and evidence included, for every kind of diagnosis."""
    layout = Layout(chunk_size=128, block_size=16)
    earlier = record("r0", PROMPT, served=WorkerMark("w0", 1))
    workers = {"w0": WorkerMark("w0", 1, evicted_ttl_blocks=9), "w1": WorkerMark("w1", 1)}
    recent = RecentRequests(DiagnosisSettings(), Clock())
    causes = set()
    gc.collect()
    tracemalloc.start()
    try:
        for i in range(1200):
            current = _variant(i)
            finding = compare(current, [earlier], layout.chunk_size)
            found = diagnose(current, finding, workers, layout, EXCERPT)
            recent.add(replace(current, diagnosis=found))
            causes.add(found.cause)
        del current, found
        gc.collect()
        held = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    assert len(recent) == 1200
    assert causes == {Cause.EVICTED, Cause.CHANGED_CONTENT, Cause.REORDERED, Cause.DIFFERENT_SCOPE,
                      Cause.NEW_PREFIX, Cause.ROUTED_ELSEWHERE}  # fmt: skip
    assert held <= recent.nbytes, (held, recent.nbytes)
