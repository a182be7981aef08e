"""Where a LoRA adapter lives, as the gateway learns it: held at start (the record says so), or loaded
by one of its own requests (a first token came back); holders are preferred; a restarted worker holds
nothing it loaded before."""

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


def test_holders_are_preferred_and_a_served_request_makes_a_holder() -> None:
    residency = AdapterResidency()
    both = [_status(HOLDS), _status(LOADS)]
    assert residency.prefer(both, "sql") == both[:1]
    assert residency.prefer(both[1:], "x") == both[1:]  # nobody holds x: whoever can load it
    assert residency.prefer(both, "") == both
    residency.served(LOADS, "x")
    residency.served(HOLDS, "other")  # not loadable there: nothing learned
    assert residency.holds(LOADS, "x")
    assert not residency.holds(HOLDS, "other")


def test_a_restarted_worker_holds_nothing_it_loaded_before() -> None:
    residency = AdapterResidency()
    residency.served(LOADS, "x")
    restarted = dataclasses.replace(LOADS, epoch=Epoch(LOADS.epoch + 1))
    assert not residency.holds(restarted, "x")
    residency.retain([restarted])
    assert not residency.holds(LOADS, "x")  # the old incarnation's entry is gone
