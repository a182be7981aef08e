"""How long a pending entry lives (``IndexSettings.pending_ms``): the TTL after the request's expected
wait, the wait clamped to what a queue can be trusted for, nonsense waits counted as none."""

from __future__ import annotations

import math

import pytest

from kvgate.index import IndexSettings
from kvgate.index.settings import MAX_PENDING_WAIT_S


@pytest.mark.parametrize(
    ("wait_s", "expected_s"),
    [
        (0.0, 2.0),
        (5.0, 7.0),
        (-3.0, 2.0),  # an estimate below zero: no wait
        (math.nan, 2.0),  # no estimate
        (3600.0, 2.0 + MAX_PENDING_WAIT_S),
        (math.inf, 2.0 + MAX_PENDING_WAIT_S),
    ],
)
def test_a_pending_entry_lives_its_ttl_after_the_expected_wait(wait_s: float, expected_s: float) -> None:
    assert IndexSettings(pending_ttl_s=2.0).pending_ms(wait_s) == round(expected_s * 1000)
