"""Where a LoRA adapter lives, as the gateway learns it: held at start (the record says so), or loaded
by one of its own requests (a first token came back); a worker that must load it starts later; a
restarted worker holds nothing it loaded before."""

from __future__ import annotations

import dataclasses

from kvgate.gateway.upstream.adapters import AdapterResidency
from kvgate.index.types import WorkerStatus
from kvgate.proto.ids import Epoch
from tests.index.helpers import LOAD, A, B, info

HOLDS = dataclasses.replace(info(A), adapters=("sql",))
LOADS = dataclasses.replace(info(B), loadable_adapters=("sql", "x"))


def _status(record):
    return WorkerStatus(record, LOAD, 10**12, 10**12 - 10_000)


def test_workers_that_must_load_an_adapter_start_later_until_they_served_it() -> None:
    residency = AdapterResidency(load_s=3.0)
    both = [_status(HOLDS), _status(LOADS)]
    assert residency.startup(both, "sql") == {B: 3.0}  # A holds sql from its start
    assert residency.startup(both, "") == {}
    residency.served(LOADS, "x")
    residency.served(HOLDS, "other")  # not loadable there: nothing learned
    assert residency.startup(both[1:], "x") == {}
    assert residency.holds(LOADS, "x")
    assert not residency.holds(HOLDS, "other")


def test_a_restarted_worker_holds_nothing_it_loaded_before() -> None:
    residency = AdapterResidency()
    residency.served(LOADS, "x")
    restarted = dataclasses.replace(LOADS, epoch=Epoch(LOADS.epoch + 1))
    assert not residency.holds(restarted, "x")
    residency.retain([restarted])
    assert not residency.holds(LOADS, "x")  # the old incarnation's entry is gone
